#include "sim/plan/plan_json.hpp"

#include <charconv>
#include <cstdint>
#include <exception>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/core/json_stream.hpp"

namespace epsim {

namespace {

using nlohmann::json;

/// Where a value of a long list sits ("routes[2]"), spelled out only for an error: a wide plan's
/// million routes would otherwise cost a string each.
struct Element {
  const char* list;
  std::size_t index;
};

/// Reads one plan document, every value through the checked getters of json_input, with the key path
/// of each value in its errors. A value that is what was expected returns at once; its place is
/// spelled only on the way to an error.
class PlanReader {
 public:
  PlanReader(const std::string& file, const std::string& place) : file_(file), place_(place) {}

  /// The place of `path` inside the plan: "line 3, routes[2].instance".
  std::string at(const std::string& path) const {
    if (path.empty()) return place_;
    return place_.empty() ? path : place_ + ", " + path;
  }
  template <typename Path>
  const json& member(const json& object, const char* key, const Path& path) const {
    if (object.is_object()) {
      const auto it = object.find(key);
      if (it != object.end()) return *it;
    }
    return json_member(object, key, file_, at(spell(path)));
  }
  const json& array(const json& object, const char* key, const std::string& path) const {
    return json_array(member(object, key, path), file_, at(key_path(path, key)));
  }
  /// The integer at `object[key]` in [lo, hi].
  template <typename Path>
  std::int64_t integer(const json& object, const char* key, const Path& path, std::int64_t lo, std::int64_t hi) const {
    const json& value = member(object, key, path);
    if (const std::optional<std::int64_t> v = json_integer_if(value, lo, hi)) return *v;
    return json_integer(value, lo, hi, file_, at(key_path(path, key)));  // (throws: the defect's message)
  }
  template <typename Path>
  int small(const json& object, const char* key, const Path& path, int lo = -1) const {
    return static_cast<int>(integer(object, key, path, lo, std::numeric_limits<int>::max()));
  }
  template <typename Enum, std::size_t N, typename Path>
  Enum choice(const json& object, const char* key, const Path& path, const char* const (&names)[N]) const {
    const json& value = member(object, key, path);
    if (value.is_string()) {
      const std::string& s = value.get_ref<const std::string&>();
      for (std::size_t i = 0; i < N; ++i)
        if (s == names[i]) return static_cast<Enum>(i);
    }
    const std::string s = json_string(value, file_, at(key_path(path, key)));
    std::string allowed;
    for (std::size_t i = 0; i < N; ++i) allowed += (i == 0 ? "" : ", ") + std::string(names[i]);
    throw InputError(file_, at(key_path(path, key)),
                     "unknown value " + json_excerpt(json(s)) + " (expected " + allowed + ")");
  }
  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw InputError(file_, at(path), message);
  }

 private:
  static const std::string& spell(const std::string& path) { return path; }
  static std::string spell(const Element& e) { return std::string(e.list) + "[" + std::to_string(e.index) + "]"; }
  template <typename Path>
  static std::string key_path(const Path& path, const char* key) {
    const std::string spelled = spell(path);
    return spelled.empty() ? key : spelled + "." + key;
  }

  const std::string& file_;
  const std::string& place_;
};

std::string indexed(const char* list, std::size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

const char* const kCarriers[] = {"ep_backend", "copy_engine", "none"};
const char* const kKinds[] = {"static", "dynamic", "replica"};
const char* const kTransferKinds[] = {"weights", "gradients"};
const char* const kPasses[] = {"forward", "backward"};
const char* const kSites[] = {"none", "host_cpu", "gpu"};
const char* const kStarts[] = {"before_dispatch", "after_dispatch"};
const char* const kTransferStarts[] = {"after_dispatch", "before_dispatch", "prefetch", "after_wgrad"};

}  // namespace

nlohmann::json plan_to_json(const Plan& plan) {
  nlohmann::json j;
  j["version"] = plan.version;
  j["balancer"] = plan.balancer;
  j["step"] = plan.step;
  j["micro_batch"] = plan.micro_batch;
  j["layer"] = plan.layer;
  j["num_gpus"] = plan.num_gpus;
  j["exchange_stages"] = plan.exchange_stages;
  auto& inst = j["instances"] = nlohmann::json::array();
  for (const auto& i : plan.instances)
    inst.push_back({{"expert", i.expert}, {"gpu", i.gpu}, {"kind", kKinds[static_cast<int>(i.kind)]}});
  auto& routes = j["routes"] = nlohmann::json::array();
  for (const auto& r : plan.routes)
    routes.push_back({{"src_rank", r.src_rank}, {"instance", r.instance}, {"tokens", r.tokens},
                      {"carrier", kCarriers[static_cast<int>(r.carrier)]}, {"via_gpu", r.via_gpu},
                      {"stage", r.stage}});
  auto& transfers = j["transfers"] = nlohmann::json::array();
  for (const auto& t : plan.transfers)
    transfers.push_back({{"kind", kTransferKinds[static_cast<int>(t.kind)]},
                         {"pass", kPasses[static_cast<int>(t.pass)]},
                         {"instance", t.instance}, {"src_gpu", t.src_gpu}, {"dst_gpu", t.dst_gpu},
                         {"bytes", t.bytes}, {"carrier", kCarriers[static_cast<int>(t.carrier)]},
                         {"start", kTransferStarts[static_cast<int>(t.start)]}});
  auto& order = j["gemm_order"] = nlohmann::json::array();
  for (const auto& groups : plan.gemm_order) {
    nlohmann::json per_gpu = nlohmann::json::array();
    for (const auto& g : groups) {
      // A plain group is its list of instances; a marked one an object, so older plan files still read.
      // backward_first is written only when set, so plans without it keep their bytes.
      if (!g.on_arrival && !g.after_planner && !g.backward_first) {
        per_gpu.push_back(g.instances);
      } else {
        nlohmann::json group = {{"instances", g.instances}, {"on_arrival", g.on_arrival}, {"after_planner", g.after_planner}};
        if (g.backward_first) group["backward_first"] = true;
        per_gpu.push_back(std::move(group));
      }
    }
    order.push_back(per_gpu);
  }
  j["planner"] = {{"site", kSites[static_cast<int>(plan.planner.site)]},
                  {"duration_ps", plan.planner.duration_ps},
                  {"start", kStarts[static_cast<int>(plan.planner.start)]},
                  {"d2h_bytes", plan.planner.d2h_bytes}};
  return j;
}

namespace {

/// JSON text written through a buffer, in dump()'s form: no spaces, integers in decimal.
class JsonText {
 public:
  /// The text reaches `out` as the buffer fills and at flush(), which the writer calls at its end:
  /// not from a destructor, since a stream that fails throws (OutputFolder's files do).
  explicit JsonText(std::ostream& out) : out_(out) { buffer_.reserve(kFlush_bytes + 256); }
  JsonText(const JsonText&) = delete;
  JsonText& operator=(const JsonText&) = delete;

  JsonText& raw(const char* text) {
    buffer_.append(text);
    return spill();
  }
  JsonText& raw(char c) {
    buffer_.push_back(c);
    return spill();
  }
  JsonText& number(std::int64_t value) {
    char digits[24];
    const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    buffer_.append(digits, end);
    return spill();
  }
  JsonText& boolean(bool value) { return raw(value ? "true" : "false"); }
  /// A key with its colon: `"name":`.
  JsonText& key(const char* name) {
    buffer_.push_back('"');
    buffer_.append(name);
    return raw("\":");
  }
  /// A string the enum tables hold (letters and underscores: nothing to escape).
  JsonText& name(const char* text) {
    buffer_.push_back('"');
    buffer_.append(text);
    return raw('"');
  }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

 private:
  static constexpr std::size_t kFlush_bytes = 1 << 16;
  JsonText& spill() {
    if (buffer_.size() >= kFlush_bytes) flush();
    return *this;
  }
  std::ostream& out_;
  std::string buffer_;
};

void write_instances(JsonText& t, const std::vector<int>& instances) {
  t.raw('[');
  for (std::size_t i = 0; i < instances.size(); ++i) {
    if (i > 0) t.raw(',');
    t.number(instances[i]);
  }
  t.raw(']');
}

}  // namespace

void write_plan_json(std::ostream& out, const Plan& plan) {
  // plan_to_json's members in the order dump() writes them, its object keys sorted.
  JsonText t(out);
  t.raw('{').key("balancer").raw(nlohmann::json(plan.balancer).dump().c_str());
  t.raw(',').key("exchange_stages").number(plan.exchange_stages);
  t.raw(',').key("gemm_order").raw('[');
  for (std::size_t g = 0; g < plan.gemm_order.size(); ++g) {
    if (g > 0) t.raw(',');
    t.raw('[');
    const std::vector<GemmGroup>& groups = plan.gemm_order[g];
    for (std::size_t k = 0; k < groups.size(); ++k) {
      const GemmGroup& group = groups[k];
      if (k > 0) t.raw(',');
      if (!group.on_arrival && !group.after_planner && !group.backward_first) {
        write_instances(t, group.instances);
        continue;
      }
      t.raw('{').key("after_planner").boolean(group.after_planner);
      if (group.backward_first) t.raw(',').key("backward_first").boolean(true);
      t.raw(',').key("instances");
      write_instances(t, group.instances);
      t.raw(',').key("on_arrival").boolean(group.on_arrival).raw('}');
    }
    t.raw(']');
  }
  t.raw(']');
  t.raw(',').key("instances").raw('[');
  for (std::size_t i = 0; i < plan.instances.size(); ++i) {
    const ExpertInstance& inst = plan.instances[i];
    if (i > 0) t.raw(',');
    t.raw('{').key("expert").number(inst.expert);
    t.raw(',').key("gpu").number(inst.gpu);
    t.raw(',').key("kind").name(kKinds[static_cast<int>(inst.kind)]).raw('}');
  }
  t.raw(']');
  t.raw(',').key("layer").number(plan.layer);
  t.raw(',').key("micro_batch").number(plan.micro_batch);
  t.raw(',').key("num_gpus").number(plan.num_gpus);
  t.raw(',').key("planner").raw('{').key("d2h_bytes").number(plan.planner.d2h_bytes);
  t.raw(',').key("duration_ps").number(plan.planner.duration_ps);
  t.raw(',').key("site").name(kSites[static_cast<int>(plan.planner.site)]);
  t.raw(',').key("start").name(kStarts[static_cast<int>(plan.planner.start)]).raw('}');
  t.raw(',').key("routes").raw('[');
  for (std::size_t i = 0; i < plan.routes.size(); ++i) {
    const TokenRoute& r = plan.routes[i];
    if (i > 0) t.raw(',');
    t.raw('{').key("carrier").name(kCarriers[static_cast<int>(r.carrier)]);
    t.raw(',').key("instance").number(r.instance);
    t.raw(',').key("src_rank").number(r.src_rank);
    t.raw(',').key("stage").number(r.stage);
    t.raw(',').key("tokens").number(r.tokens);
    t.raw(',').key("via_gpu").number(r.via_gpu).raw('}');
  }
  t.raw(']');
  t.raw(',').key("step").number(plan.step);
  t.raw(',').key("transfers").raw('[');
  for (std::size_t i = 0; i < plan.transfers.size(); ++i) {
    const Transfer& x = plan.transfers[i];
    if (i > 0) t.raw(',');
    t.raw('{').key("bytes").number(x.bytes);
    t.raw(',').key("carrier").name(kCarriers[static_cast<int>(x.carrier)]);
    t.raw(',').key("dst_gpu").number(x.dst_gpu);
    t.raw(',').key("instance").number(x.instance);
    t.raw(',').key("kind").name(kTransferKinds[static_cast<int>(x.kind)]);
    t.raw(',').key("pass").name(kPasses[static_cast<int>(x.pass)]);
    t.raw(',').key("src_gpu").number(x.src_gpu);
    t.raw(',').key("start").name(kTransferStarts[static_cast<int>(x.start)]).raw('}');
  }
  t.raw(']');
  t.raw(',').key("version").number(plan.version).raw('}');
  t.flush();
}

namespace {

ExpertInstance instance_from_json(const PlanReader& in, const json& i, std::size_t k) {
  const Element at{"instances", k};
  return {in.small(i, "expert", at, 0), in.small(i, "gpu", at, 0), in.choice<InstanceKind>(i, "kind", at, kKinds)};
}

TokenRoute route_from_json(const PlanReader& in, const json& r, std::size_t k) {
  const Element at{"routes", k};
  return {in.small(r, "src_rank", at, 0), in.small(r, "instance", at, 0),
          in.integer(r, "tokens", at, 0, kMaxPlanTokens), in.choice<Carrier>(r, "carrier", at, kCarriers),
          in.small(r, "via_gpu", at), in.small(r, "stage", at)};
}

Transfer transfer_from_json(const PlanReader& in, const json& t, std::size_t k) {
  const Element at{"transfers", k};
  // Read in the order the plan format lists the fields, so that of several bad ones the first is named.
  const TransferKind kind = in.choice<TransferKind>(t, "kind", at, kTransferKinds);
  const PassKind pass = in.choice<PassKind>(t, "pass", at, kPasses);
  const int instance = in.small(t, "instance", at, 0);
  const int src_gpu = in.small(t, "src_gpu", at, 0);
  const int dst_gpu = in.small(t, "dst_gpu", at, 0);
  const std::int64_t bytes = in.integer(t, "bytes", at, 0, kMaxPlanBytes);
  const Carrier carrier = in.choice<Carrier>(t, "carrier", at, kCarriers);
  Transfer transfer{kind, pass, carrier, TransferStart::after_dispatch, instance, src_gpu, dst_gpu, bytes};
  // "start" came with the third transfer timing; plans written before it leave after the dispatch.
  if (t.is_object() && t.contains("start")) transfer.start = in.choice<TransferStart>(t, "start", at, kTransferStarts);
  return transfer;
}

/// A plan's three long lists (instances, routes, transfers), converted element by element: from a
/// document's arrays (plan_from_json) or as the parser meets them, the document never holding them
/// (read_plan_line). A list keeps its first bad element's error, which finish_plan raises where
/// plan_from_json's order of checks reaches that list, so both readers name the same first defect.
class PlanLists : public JsonListSink {
 public:
  explicit PlanLists(const PlanReader& in) : in_(in) {}

  bool starts(const std::string& key) override {
    current_ = list_of(key);
    if (current_ == kNone) return false;
    // A repeated key's last value is the plan's.
    count_[current_] = 0;
    error_[current_] = nullptr;
    if (current_ == kInstances) instances_.clear();
    if (current_ == kRoutes) routes_.clear();
    if (current_ == kTransfers) transfers_.clear();
    return true;
  }
  void take(json&& element) override { add(element); }

  /// The next element of the current list.
  void add(const json& element) {
    const std::size_t k = count_[current_]++;
    if (error_[current_]) return;
    try {
      if (current_ == kInstances) instances_.push_back(instance_from_json(in_, element, k));
      if (current_ == kRoutes) routes_.push_back(route_from_json(in_, element, k));
      if (current_ == kTransfers) transfers_.push_back(transfer_from_json(in_, element, k));
    } catch (const InputError&) {
      error_[current_] = std::current_exception();
    }
  }
  /// Every element of `j`'s lists, as the parser would have handed them over.
  void add_all(const json& j) {
    if (!j.is_object()) return;
    for (const char* key : {"instances", "routes", "transfers"}) {
      const auto it = j.find(key);
      if (it == j.end() || !it->is_array()) continue;
      starts(key);
      for (const json& element : *it) add(element);
    }
  }

  std::vector<ExpertInstance> instances() { return checked(kInstances, std::move(instances_)); }
  TokenRoutes routes() { return checked(kRoutes, std::move(routes_)); }
  Transfers transfers() { return checked(kTransfers, std::move(transfers_)); }

 private:
  enum List { kInstances, kRoutes, kTransfers, kNone };
  static List list_of(const std::string& key) {
    if (key == "instances") return kInstances;
    if (key == "routes") return kRoutes;
    if (key == "transfers") return kTransfers;
    return kNone;
  }
  template <typename Vector>
  Vector checked(List list, Vector&& elements) {
    if (error_[list]) std::rethrow_exception(error_[list]);
    return std::move(elements);
  }

  const PlanReader& in_;
  List current_ = kNone;
  std::size_t count_[3] = {0, 0, 0};
  std::exception_ptr error_[3];
  std::vector<ExpertInstance> instances_;
  TokenRoutes routes_;
  Transfers transfers_;
};

/// The plan `j` describes, its long lists taken from `lists`: every check in one order, whichever
/// way the lists were read.
Plan finish_plan(const json& j, PlanLists& lists, const PlanReader& in, const std::string& file) {
  if (!j.is_object()) in.fail("", "expected a plan (a JSON object)");
  Plan plan;
  const std::int64_t version = in.integer(j, "version", "", 0, std::numeric_limits<int>::max());
  if (version != kPlanVersion)
    in.fail("version", "plan version " + std::to_string(version) + " is not supported (expected " +
                           std::to_string(kPlanVersion) + ")");
  plan.balancer = json_string(in.member(j, "balancer", ""), file, in.at("balancer"));
  const std::int64_t u32 = std::numeric_limits<std::uint32_t>::max();
  plan.step = static_cast<std::uint32_t>(in.integer(j, "step", "", 0, u32));
  plan.micro_batch = static_cast<std::uint32_t>(in.integer(j, "micro_batch", "", 0, u32));
  plan.layer = static_cast<std::uint32_t>(in.integer(j, "layer", "", 0, u32));
  plan.num_gpus = static_cast<int>(in.integer(j, "num_gpus", "", 1, kMaxPlanGpus));
  plan.exchange_stages = static_cast<int>(in.integer(j, "exchange_stages", "", 1, kMaxExchangeStages));
  in.array(j, "instances", "");
  plan.instances = lists.instances();
  in.array(j, "routes", "");
  plan.routes = lists.routes();
  in.array(j, "transfers", "");
  plan.transfers = lists.transfers();
  const json& order = in.array(j, "gemm_order", "");
  for (std::size_t g = 0; g < order.size(); ++g) {
    const std::string at = indexed("gemm_order", g);
    std::vector<GemmGroup> groups;
    for (std::size_t k = 0; k < json_array(order[g], file, in.at(at)).size(); ++k) {
      const std::string group_at = at + "[" + std::to_string(k) + "]";
      GemmGroup group{static_cast<int>(g), {}};
      const json* list = &order[g][k];
      std::string ids_at = group_at;
      if (list->is_object()) {
        group.on_arrival = json_bool(in.member(*list, "on_arrival", group_at), file, in.at(group_at + ".on_arrival"));
        group.after_planner =
            json_bool(in.member(*list, "after_planner", group_at), file, in.at(group_at + ".after_planner"));
        // backward_first came later than the other marks; groups written before it lack the key.
        if (list->contains("backward_first"))
          group.backward_first =
              json_bool(in.member(*list, "backward_first", group_at), file, in.at(group_at + ".backward_first"));
        ids_at = group_at + ".instances";
        list = &in.member(*list, "instances", group_at);
      }
      const json& ids = json_array(*list, file, in.at(ids_at));
      for (std::size_t m = 0; m < ids.size(); ++m)
        group.instances.push_back(static_cast<int>(json_integer(ids[m], 0, std::numeric_limits<int>::max(), file,
                                                                 in.at(ids_at + "[" + std::to_string(m) + "]"))));
      groups.push_back(std::move(group));
    }
    plan.gemm_order.push_back(std::move(groups));
  }
  const json& planner = in.member(j, "planner", "");
  plan.planner.site = in.choice<PlannerSite>(planner, "site", "planner", kSites);
  plan.planner.duration_ps = in.integer(planner, "duration_ps", "planner", 0, kMaxPlannerDuration_ps);
  plan.planner.start = in.choice<PlannerStart>(planner, "start", "planner", kStarts);
  plan.planner.d2h_bytes = in.integer(planner, "d2h_bytes", "planner", 0, kMaxPlanBytes);
  if (const auto defect = find_plan_defect(plan, 0)) in.fail(defect->place, defect->message);
  return plan;
}

}  // namespace

Plan plan_from_json(const nlohmann::json& j, const std::string& file, const std::string& place) {
  const PlanReader in(file, place);
  PlanLists lists(in);
  lists.add_all(j);
  return finish_plan(j, lists, in, file);
}

std::optional<Plan> read_plan_line(std::istream& in, const std::string& file, std::uint64_t line,
                                   std::uint64_t& bytes) {
  const std::string place = "line " + std::to_string(line);
  const PlanReader reader(file, place);
  PlanLists lists(reader);
  const std::optional<json> rest = parse_json_line(in, file, line, &lists, bytes);
  if (!rest) return std::nullopt;
  return finish_plan(*rest, lists, reader, file);
}

}  // namespace epsim
