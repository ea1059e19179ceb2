// The Python helpers of traces/import/ that turn PyTorch dumps (SGLang stat and per-token modes) into
// files epsim imports. They need PyTorch: the test skips when /usr/bin/python3 cannot import torch.
#include <doctest/doctest.h>

#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"
#include "traces/format/trace_reader.hpp"

using namespace epsim;

namespace {

bool have_torch() {
  const auto dir = epsim::test::scratch_dir("torch_probe");
  return epsim::test::run_shell("/usr/bin/python3 -c 'import torch'", dir).status == 0;
}

std::string script(const char* name) { return (epsim::test::source_dir() / "traces/import" / name).string(); }

}  // namespace

TEST_CASE("torch_to_json.py and sglang_pt_to_counts.py: SGLang dumps to exact traces") {
  if (!have_torch()) {
    MESSAGE("skipped: /usr/bin/python3 has no torch");
    return;
  }
  const auto dir = epsim::test::scratch_dir("torch_dump_scripts");
  // Stat mode: logical_count [passes, layers, experts], one pass of a 4-slot buffer used.
  auto r = epsim::test::run_shell(
      "/usr/bin/python3 -c \"import torch; lc = torch.zeros((4, 1, 4), dtype=torch.int32); "
      "lc[1] = torch.tensor([[3, 1, 0, 2]]); torch.save({'rank': 0, 'logical_count': lc}, 'stat.pt')\" && "
      "/usr/bin/python3 '" + script("torch_to_json.py") + "' stat.pt -o stat.json --provenance 'fake stat dump' && "
      "$EPSIM trace import sglang-stat stat.json --ranks 2 --top-k 2 -o stat.eptrace",
      dir);
  REQUIRE(r.status == 0);
  {
    TraceReader reader((dir / "stat.eptrace").string());
    CHECK(reader.header().provenance == "fake stat dump");
    TraceRecord rec;
    REQUIRE(reader.next(rec));  // the empty slots are skipped; pass 1 is step 1
    CHECK(rec.step == 1);
    // [3 1 0 2] over 2 ranks: 3 -> 2 + 1, the odd unit to rank 0; 1 -> rank 1; 2 -> 1 + 1.
    CHECK(rec.counts == std::vector<std::uint32_t>{2, 0, 0, 1, /**/ 1, 1, 0, 1});
    CHECK_FALSE(reader.next(rec));
  }
  // Per-token mode: one file per rank, physical ids mapped to logical ones.
  r = epsim::test::run_shell(
      "/usr/bin/python3 -c \"import torch\n"
      "p2l = torch.tensor([[0, 1, 2, 3, 0, 1]])\n"
      "for rank, ids in ((0, [[[0, 4], [1, 2]]]), (1, [[[5, 3], [3, 2]]])):\n"
      "    rec = {'forward_pass_id': 7, 'rank': rank, 'topk_ids_of_layer': torch.tensor(ids, dtype=torch.int32)}\n"
      "    torch.save({'records': [rec], 'last_physical_to_logical_map': p2l}, 'dump_%d.pt' % rank)\" && "
      "/usr/bin/python3 '" + script("sglang_pt_to_counts.py") +
          "' dump_0.pt dump_1.pt --experts 4 --top-k 2 --provenance 'fake per-token dump' -o 'c-{rank}.jsonl' && "
          "$EPSIM trace import counts-jsonl c-0.jsonl c-1.jsonl -o tok.eptrace",
      dir);
  REQUIRE(r.status == 0);
  TraceReader reader((dir / "tok.eptrace").string());
  TraceRecord rec;
  REQUIRE(reader.next(rec));
  // rank 0: physical 0 4 1 2 -> logical 0 0 1 2; rank 1: 5 3 3 2 -> 1 3 3 2.
  CHECK(rec.counts == std::vector<std::uint32_t>{2, 1, 1, 0, /**/ 0, 1, 1, 2});
  CHECK_FALSE(reader.next(rec));
}
