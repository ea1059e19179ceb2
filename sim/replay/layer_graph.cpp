#include "sim/replay/layer_graph.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace epsim {

LayerGraph build_layer_graph(const SimContext& context, const Plan& plan, int stages) {
  const int n = context.num_gpus();
  LayerGraph graph;
  std::vector<int>& task_of_instance = graph.task_of_instance;
  task_of_instance.assign(plan.instances.size(), -1);
  graph.tasks_of.assign(n, {});
  graph.has_on_arrival.assign(n, false);
  graph.has_after_planner.assign(n, false);
  // A task per GEMM group, room made once: FasterMoE's groups (a GPU's per stage) are a quarter of a
  // million at EP 1,024, and each doubling moved every task's lists.
  std::size_t groups = 0;
  for (int g = 0; g < n; ++g) groups += plan.gemm_order[g].size();
  graph.tasks.reserve(groups);
  for (int g = 0; g < n; ++g) {
    for (const GemmGroup& gg : plan.gemm_order[g]) {
      GemmTask task;
      task.gpu = g;
      task.group = static_cast<int>(graph.tasks_of[g].size());
      task.instances = gg.instances;
      task.on_arrival = gg.on_arrival;
      task.after_planner = gg.after_planner;
      task.backward_first = gg.backward_first;
      for (int i : gg.instances) task_of_instance[i] = static_cast<int>(graph.tasks.size());
      if (gg.on_arrival) graph.has_on_arrival[g] = true;
      if (gg.after_planner) graph.has_after_planner[g] = true;
      graph.tasks_of[g].push_back(static_cast<int>(graph.tasks.size()));
      graph.tasks.push_back(std::move(task));
    }
  }
  // validate_plan guarantees every instance is in exactly one group, so task_of_instance is complete.
  // A task waits for the exchange stages its tokens belong to (a GPU's own tokens are stage 0 of the
  // exchange, as the dispatch kernel tells the GPU what it received), and that stage's combine waits
  // for the task. Stage -1 tokens (computed where they are, outside the exchange) tie it to nothing;
  // tokens brought by Copy Engine tie it to their copies instead.
  // The last combine stage is issued after every expert GEMM of the GPU that took part in the
  // exchange, whatever stage its tokens came in (Copy Engine ones included), as frameworks issue the
  // combine after the expert computation on the stream.
  auto add_stage = [](GemmTask& task, int stage) {
    // Most routes of a task name the stage its last route did (every route, with one stage).
    if (!task.stages.empty() && task.stages.back() == stage) return;
    if (std::find(task.stages.begin(), task.stages.end(), stage) == task.stages.end()) task.stages.push_back(stage);
  };
  // One pass over the routes for everything they tell (a wide plan has millions): each instance's
  // tokens, each task's stages, and the Copy Engine legs, (from, to, task) in a fixed order.
  std::vector<std::int64_t> inst_tokens(plan.instances.size(), 0);
  std::map<std::tuple<int, int, int>, CeLeg> legs;
  // The last EP route's task and stage: a source's routes to one GPU's experts come one after another
  // and tell that task nothing new, so their task is not touched again.
  int last_task = -1;
  int last_stage = -1;
  for (const TokenRoute& r : plan.routes) {
    inst_tokens[r.instance] += r.tokens;
    if (r.tokens <= 0) continue;
    const int task_id = task_of_instance[r.instance];
    // Tokens the Copy Engine brings from another GPU (the instance's GPU is read for these alone:
    // a wide plan's millions of other routes need only their task).
    bool by_copy_engine = false;
    if (r.carrier == Carrier::copy_engine) {
      const int dst = plan.instances[r.instance].gpu;
      const int from = r.via_gpu >= 0 ? r.via_gpu : r.src_rank;
      by_copy_engine = from != dst;
      if (by_copy_engine) {
        CeLeg& leg = legs[{from, dst, task_id}];
        leg.from = from;
        leg.to = dst;
        leg.task = task_id;
        leg.after_dispatch = r.via_gpu >= 0 && r.via_gpu != r.src_rank;
        leg.tokens += static_cast<double>(r.tokens);
      }
    }
    if (r.stage < 0) continue;
    if (!by_copy_engine && task_id == last_task && r.stage == last_stage) continue;
    GemmTask& task = graph.tasks[task_id];
    add_stage(task, stages - 1);
    if (by_copy_engine) continue;
    task.input_stage = std::max(task.input_stage, r.stage);
    add_stage(task, r.stage);
    last_task = task_id;
    last_stage = r.stage;
  }
  for (GemmTask& task : graph.tasks) {
    std::vector<std::int64_t> rows;
    rows.reserve(task.instances.size());
    for (int i : task.instances) rows.push_back(inst_tokens[i]);
    task.work_ps = context.gemm().grouped_time_ps(rows, context.model().expert_ffn_size);
    task.hbm_fraction = context.gemm().hbm_fraction(rows, context.model().expert_ffn_size);
  }
  for (const Transfer& t : plan.transfers) {
    if (t.bytes <= 0) continue;
    GemmTask& task = graph.tasks[task_of_instance[t.instance]];
    if (t.pass == PassKind::backward) {
      // find_plan_defect allows before_dispatch in the backward only for EP weights.
      if (t.start == TransferStart::before_dispatch && t.src_gpu != t.dst_gpu) task.restored_weights = true;
      continue;
    }
    if (t.carrier == Carrier::copy_engine) {
      ++task.ce_weights;
    } else if (t.carrier == Carrier::ep_backend) {
      switch (t.start) {
        case TransferStart::after_dispatch: task.ep_weights = true; break;
        case TransferStart::before_dispatch: task.synced_weights = true; break;
        case TransferStart::prefetch: task.prefetched_weights = true; break;
        case TransferStart::after_wgrad: break;  // backward only (find_plan_defect)
      }
    }
  }
  // Gradient reduces: one per expert whose after_wgrad EP transfers move bytes, in expert order.
  std::map<int, GradientReduce> reduces;
  for (const Transfer& t : plan.transfers) {
    if (t.pass != PassKind::backward || t.start != TransferStart::after_wgrad || t.carrier != Carrier::ep_backend ||
        t.bytes <= 0 || t.src_gpu == t.dst_gpu)
      continue;
    const int expert = plan.instances[t.instance].expert;
    GradientReduce& reduce = reduces[expert];
    if (reduce.wgrads_before.empty()) {
      reduce.expert = expert;
      reduce.wgrads_before.assign(n, 0);
    }
    reduce.payload.pairs.push_back({t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes)});
  }
  std::map<int, int> reduce_of_expert;
  for (auto& [expert, reduce] : reduces) {
    // Each pair once, in (from, to) order; a pair's transfers summed in plan order, as a matrix
    // filled transfer by transfer would hold them.
    std::vector<ExchangePayload::Pair> met = std::move(reduce.payload.pairs);
    std::stable_sort(met.begin(), met.end(), [](const ExchangePayload::Pair& x, const ExchangePayload::Pair& y) {
      return x.from != y.from ? x.from < y.from : x.to < y.to;
    });
    std::vector<ExchangePayload::Pair>& pairs = reduce.payload.pairs;
    pairs.clear();
    for (const ExchangePayload::Pair& pair : met) ExchangePayload::append(pairs, pair.from, pair.to, pair.amount);
    reduce_of_expert[expert] = static_cast<int>(graph.reduces.size());
    graph.reduces.push_back(std::move(reduce));
  }
  // Each task holding an instance of a reduced expert releases its GPU's part of that reduce once.
  for (std::size_t i = 0; i < plan.instances.size() && !reduce_of_expert.empty(); ++i) {
    const auto found = reduce_of_expert.find(plan.instances[i].expert);
    if (found == reduce_of_expert.end()) continue;
    GemmTask& task = graph.tasks[task_of_instance[i]];
    if (std::find(task.reduces.begin(), task.reduces.end(), found->second) != task.reduces.end()) continue;
    task.reduces.push_back(found->second);
    ++graph.reduces[found->second].wgrads_before[task.gpu];
  }
  for (auto& [key, leg] : legs) {
    graph.tasks[leg.task].ce_legs.push_back(static_cast<int>(graph.ce_legs.size()));
    graph.ce_legs.push_back(leg);
  }
  return graph;
}

std::vector<std::vector<double>> ep_transfer_bytes(const Plan& plan, int num_gpus, PassKind pass,
                                                   TransferStart start) {
  const auto moves = [&](const Transfer& t) {
    return t.pass == pass && t.start == start && t.carrier == Carrier::ep_backend && t.bytes > 0 && t.src_gpu != t.dst_gpu;
  };
  // Most plans move no weights at some (or every) start: no n x n matrix for them, which at wide EP
  // would be megabytes of fresh pages for each pass.
  std::vector<std::vector<double>> bytes;
  for (const Transfer& t : plan.transfers) {
    if (!moves(t)) continue;
    if (bytes.empty()) bytes.assign(num_gpus, std::vector<double>(num_gpus, 0.0));
    bytes[t.src_gpu][t.dst_gpu] += static_cast<double>(t.bytes);
  }
  return bytes;
}

}  // namespace epsim
