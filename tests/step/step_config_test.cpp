// The non_moe model keys and the experiment's step block as the loaders read them, and `epsim run`
// printing and writing the step prediction only when asked.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim;
using namespace epsim::test;

namespace {

std::string repo(const std::string& name) { return (source_dir() / name).string(); }

std::string error_of(const std::string& experiment_path) {
  try {
    load_experiment(experiment_path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// An experiment on the bundled sample trace; `extra` is appended (a step block, say).
std::string experiment_yaml(const std::string& model, const std::string& extra, bool backward = true) {
  return "kind: experiment\n"
         "name: step-test\n"
         "trace: " + repo("traces/samples/glm5-128e-ep16.eptrace") + "\n"
         "model: " + model + "\n"
         "hardware: " + repo("models/h100-sxm-8.yaml") + "\n"
         "ep_degree: 16\n"
         "balancer:\n  name: static_ep\n"
         "output: out\n"
         "max_records: 2\n"
         "backward: " + (backward ? "true" : "false") + "\n" + extra;
}

const char* kStep = "step:\n  mode: training\n  sequence_length: 4096\n  overlap: two_micro_batch\n";

}  // namespace

TEST_CASE("the bundled models carry their non-MoE work") {
  const ModelSpec v3 = load_model(repo("models/deepseek-v3.yaml"));
  CHECK(v3.non_moe.layers == 61);
  CHECK(v3.non_moe.dense_layers == 3);
  CHECK(v3.non_moe.moe_layers() == 58);
  CHECK(v3.non_moe.dense_ffn_size == 18432);
  CHECK(v3.non_moe.attention_params == 187105280);
  CHECK(v3.non_moe.gemm == Dtype::fp8);
  for (const char* name : {"models/glm5-like-128.yaml", "models/glm5-like-256.yaml"}) {
    const ModelSpec glm = load_model(repo(name));
    CHECK(glm.non_moe.layers == 78);
    CHECK(glm.non_moe.moe_layers() == 75);
    CHECK(glm.non_moe.attention_params == 165019648);
    CHECK(glm.non_moe.vocab_size == 154880);
  }
  const ModelSpec flame = load_model(repo("models/flame-moe-290m.yaml"));
  CHECK(flame.non_moe.moe_layers() == 8);
  CHECK(flame.non_moe.attention_gemm_calls == 2);
  CHECK(flame.non_moe.gemm == Dtype::bf16);
}

TEST_CASE("a model without a non_moe block still loads, and an experiment without a step block has none") {
  const fs::path dir = scratch_dir("step_plain_model");
  write_file(dir / "m.yaml",
             "kind: model\nname: plain\nhidden_size: 64\nexpert_ffn_size: 32\nnum_experts: 128\ntop_k: 8\n"
             "gated_ffn: true\ndtype_bytes: 2\n");
  const ModelSpec m = load_model((dir / "m.yaml").string());
  CHECK_FALSE(m.non_moe.described());
  write_file(dir / "x.yaml", experiment_yaml((dir / "m.yaml").string(), ""));
  CHECK_FALSE(load_experiment((dir / "x.yaml").string()).step.has_value());
  // The same model with a step block is refused at the block.
  write_file(dir / "x.yaml", experiment_yaml((dir / "m.yaml").string(), kStep));
  const std::string err = error_of((dir / "x.yaml").string());
  CHECK(err.find("x.yaml:12:1") != std::string::npos);
  CHECK(err.find("no non_moe block") != std::string::npos);
}

TEST_CASE("the step block is read strictly, each error at its file:line:column") {
  const fs::path dir = scratch_dir("step_bad_keys");
  const std::string model = repo("models/glm5-like-128.yaml");
  write_file(dir / "ok.yaml", experiment_yaml(model, kStep));
  const ExperimentSpec x = load_experiment((dir / "ok.yaml").string());
  REQUIRE(x.step.has_value());
  CHECK(x.step->mode == StepMode::training);
  CHECK(x.step->sequence_length == 4096);
  CHECK(x.step->overlap == StepOverlap::two_micro_batch);

  write_file(dir / "typo.yaml", experiment_yaml(model, "step:\n  mode: training\n  sequence_length: 4096\n  overlapp: none\n"));
  std::string err = error_of((dir / "typo.yaml").string());
  CHECK(err.find("typo.yaml:15:3") != std::string::npos);
  CHECK(err.find("overlapp") != std::string::npos);

  write_file(dir / "mode.yaml", experiment_yaml(model, "step:\n  mode: serving\n  sequence_length: 4096\n"));
  err = error_of((dir / "mode.yaml").string());
  CHECK(err.find("mode.yaml:13:9") != std::string::npos);

  write_file(dir / "len.yaml", experiment_yaml(model, "step:\n  mode: training\n  sequence_length: 0\n"));
  err = error_of((dir / "len.yaml").string());
  CHECK(err.find("len.yaml:14:20") != std::string::npos);

  // Inference runs forward only: the experiment must not simulate a backward pass it would ignore.
  write_file(dir / "pass.yaml", experiment_yaml(model, "step:\n  mode: decode\n  sequence_length: 4096\n"));
  err = error_of((dir / "pass.yaml").string());
  CHECK(err.find("pass.yaml:13:3") != std::string::npos);
  CHECK(err.find("backward: false") != std::string::npos);
}

TEST_CASE("bad non_moe keys name the model file, line and column") {
  const fs::path dir = scratch_dir("step_bad_model");
  const std::string head =
      "kind: model\nname: bad\nhidden_size: 64\nexpert_ffn_size: 32\nnum_experts: 8\ntop_k: 2\n"
      "gated_ffn: true\ndtype_bytes: 2\nnon_moe:\n  layers: 4\n";
  auto err = [&](const std::string& body) {
    write_file(dir / "m.yaml", head + body);
    try {
      load_model((dir / "m.yaml").string());
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string keys = "  attention_params: 1000\n  attention_flops_per_position: 10\n  kv_cache_bytes_per_position: 4\n";
  CHECK(err(keys).empty());
  CHECK(err(keys + "  dense_layers: 4\n").find("m.yaml:14:3") != std::string::npos);       // no MoE layer left
  CHECK(err(keys + "  dense_layers: 1\n").find("dense_ffn_size") != std::string::npos);   // needed then
  CHECK(err(keys + "  gemm: int4\n").find("m.yaml:14:9") != std::string::npos);
  CHECK(err("  attention_params: 1000\n").find("attention_flops_per_position") != std::string::npos);
}

TEST_CASE("epsim run prints and writes the step prediction only for an experiment with a step block") {
  const fs::path dir = scratch_dir("step_run");
  write_file(dir / "plain.yaml", experiment_yaml(repo("models/glm5-like-128.yaml"), ""));
  CliResult r = run_epsim("run plain.yaml -o plain", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("step time") == std::string::npos);
  CHECK_FALSE(fs::exists(dir / "plain/step.json"));

  write_file(dir / "step.yaml", experiment_yaml(repo("models/glm5-like-128.yaml"), kStep));
  r = run_epsim("run step.yaml -o step", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("step (training, sequence length 4096, overlap two_micro_batch; 78 layers = 3 dense + 75 MoE") !=
        std::string::npos);
  CHECK(r.out.find("gap to bound (us)") != std::string::npos);
  CHECK(read_file(dir / "step/summary.txt").find("step time (us)") != std::string::npos);
  const std::string json = read_file(dir / "step/step.json");
  CHECK(json.find("\"step_us\"") != std::string::npos);
  CHECK(json.find("\"gap_to_bound_us\"") != std::string::npos);
  // Deterministic: a second run writes the same file.
  r = run_epsim("run step.yaml -o again", dir);
  REQUIRE(r.status == 0);
  CHECK(read_file(dir / "again/step.json") == json);
}
