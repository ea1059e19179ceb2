#include "hw/host/hw_commands.hpp"

#include <stdexcept>

namespace epsim::hw {

namespace {

const char* kExitStatus =
    "Exit status: 0 ok, 1 a failed CUDA/cuBLAS/NCCL call, a collective past --nccl-timeout-s or a checksum\n"
    "mismatch (nothing is written), 2 bad arguments or input.\n";

const char* kOutputOptions =
    "  -o, --output FILE       the file to write (atomically; required)\n"
    "  --force                 replace FILE if it exists (refused otherwise, before any GPU work)\n";

const char* kHeaderOptions =
    "  --hardware NAME         the preset these measurements belong to, written as the header's hardware:\n";

std::vector<HwCommand> make_commands() {
  std::vector<HwCommand> c;
  c.push_back({"suite",
               "every measurement epsim calibrate fits, on 1 to 8 GPUs, into one file",
               std::string("usage: epsim-hw suite -o SET.yaml [--gpus N] [--quick] [--shapes HxF,...] [--force]\n"
                           "                      [--hardware NAME] [--device D] [--nccl-timeout-s 120] [--no-verify]\n"
                           "\n"
                           "Runs the whole measurement suite and writes one kind: measurements file for\n"
                           "`epsim calibrate SET.yaml --base models/h100-sxm-8.yaml -o models/my-cluster.yaml`:\n"
                           "  grouped_gemm    BF16 expert grouped GEMMs over rows per expert, experts and two MoE\n"
                           "                  shapes (hidden 7168 / ffn 2048, hidden 4096 / ffn 1536); FP8 (cuBLASLt)\n"
                           "                  too on devices of compute capability 8.9 or above\n"
                           "  copy            ce_local, ce_peer, h2d, d2h and sm_copy over sizes\n"
                           "  gemm_with_copy  the GEMM alone and beside a copy loop within the GPU\n"
                           "  all_to_all      NCCL all-to-all over bytes per pair           (2 or more GPUs)\n"
                           "  ep_comm         dispatch (FP8 and BF16) and combine (BF16) of DeepEP-benchmark-shaped\n"
                           "                  traffic as NCCL all-to-all-v: hidden 7168, top-8 of 256 experts,\n"
                           "                  uniform routing, tokens per rank swept            (2 or more GPUs)\n"
                           "With one GPU the multi-GPU parts are skipped (said on stderr). The single-GPU parts take\n"
                           "about a minute on an H100 or H200 (--quick: a few seconds); with 2 or more GPUs the NCCL\n"
                           "parts come on top.\n"
                           "\n"
                           "Options:\n") +
                   kOutputOptions +
                   "  --gpus N                GPUs for the multi-GPU parts (default: all visible, at most 8)\n"
                   "  --device D              the GPU of the single-GPU parts (default 0)\n"
                   "  --quick                 reduced grid\n"
                   "  --shapes HxF,...        your model's expert shapes too (hidden x expert FFN, multiples of 16;\n"
                   "                          gated, 3 matrices), with 1, 8 and 32 experts (8 with --quick)\n" +
                   kHeaderOptions +
                   "  --nccl-timeout-s S      deadline of every NCCL wait (default 120)\n"
                   "  --no-verify             skip the checksums of moved data\n" + kExitStatus,
               {"o", "gpus", "device", "hardware", "nccl-timeout-s", "shapes"},
               {"quick", "force", "no-verify"},
               {"o"},
               ""});
  c.push_back({"bench gemm",
               "expert grouped GEMM time over rows per expert and experts (BF16, FP8)",
               std::string("usage: epsim-hw bench gemm -o FILE.yaml [--device D] [--hidden 6144] [--ffn 2048]\n"
                           "                           [--matrices 3] [--experts 1,2,4,8,16,32] [--tokens LIST]\n"
                           "                           [--dtype bf16|fp8|bf16,fp8] [--impl grouped|loop|best]\n"
                           "                           [--warmup 5] [--reps 50] [--hardware NAME] [--force]\n"
                           "\n"
                           "Per expert: up projection [M x H] x [H x (matrices-1)*F], then down [M x F] x [F x H];\n"
                           "every expert has its own weights. Output series: grouped_gemm.\n"
                           "\n"
                           "Options:\n") +
                   kOutputOptions +
                   "  --device D              CUDA device (default 0)\n"
                   "  --hidden H, --ffn F     hidden and expert FFN sizes (default 6144, 2048)\n"
                   "  --matrices N            weight matrices per expert: 3 gated, 2 plain, 1 one GEMM (default 3)\n"
                   "  --experts LIST          experts per grouped GEMM (default 1,2,4,8,16,32)\n"
                   "  --tokens LIST           rows per expert (default 1..8192: powers of two, 128-multiples,\n"
                   "                          unaligned counts)\n"
                   "  --dtype LIST            bf16 (cuBLAS) and/or fp8 (cuBLASLt E4M3, compute capability >= 8.9)\n"
                   "                          (default bf16)\n"
                   "  --impl grouped|loop|best  BF16: cublasGemmGroupedBatchedEx, a cublasGemmEx loop, or both timed\n"
                   "                          at every point and the faster kept (default grouped; the suite: best)\n"
                   "  --warmup N, --reps N    untimed and timed runs per point (default 5, 50)\n" +
                   kHeaderOptions + "Lists: 1,2,4 or A:B or A:B:pow2.\n" + kExitStatus,
               {"o", "device", "hidden", "ffn", "matrices", "experts", "tokens", "dtype", "impl", "warmup", "reps",
                "hardware"},
               {"force"},
               {"o"},
               ""});
  c.push_back({"bench copy",
               "Copy Engine and SM copy time over sizes",
               std::string("usage: epsim-hw bench copy -o FILE.yaml [--device D] [--sizes 4K,...,1G] [--reps 20]\n"
                           "                           [--trials 5] [--kinds ce_local,ce_peer,h2d,d2h,sm_copy]\n"
                           "                           [--sm-blocks 1,2,4] [--no-verify] [--no-sm-probe] [--hardware NAME]\n"
                           "                           [--force]\n"
                           "\n"
                           "ce_local: D2D on the GPU; ce_peer: to the first peer-accessible GPU; h2d / d2h: pinned\n"
                           "host memory; sm_copy: a copy kernel. Output series: copy. When the largest size is 4 MiB\n"
                           "or more, each kind is also probed for SM use: a copy of up to 64 MiB beside a kernel that\n"
                           "holds every SM (one comment line per kind).\n"
                           "\n"
                           "Options:\n") +
                   kOutputOptions +
                   "  --device D              CUDA device (default 0)\n"
                   "  --sizes LIST            bytes per copy, K/M/G suffixes (default 4K,16K,64K,256K,1M,4M,16M,64M,256M,1G)\n"
                   "  --reps N, --trials N    copies per gated batch and batches per point (default 20, 5)\n"
                   "  --kinds LIST            which copies (default all five)\n"
                   "  --sm-blocks LIST        sm_copy grids in blocks per SM; the largest is written (default 1,2,4)\n"
                   "  --no-verify             skip the checksums of the copied data\n"
                   "  --no-sm-probe           skip the SM probe\n" +
                   kHeaderOptions + kExitStatus,
               {"o", "device", "sizes", "reps", "trials", "kinds", "sm-blocks", "hardware"},
               {"force", "no-verify", "no-sm-probe"},
               {"o"},
               ""});
  c.push_back({"bench contention",
               "grouped GEMM alone and beside a copy loop within the GPU",
               std::string("usage: epsim-hw bench contention -o FILE.yaml [--device D] [--hidden 6144] [--ffn 2048]\n"
                           "                           [--matrices 3] [--experts 8] [--tokens 16,64,256,1024,4096]\n"
                           "                           [--copy-bytes 256M] [--copy-api memcpy|batch] [--impl grouped|loop|best]\n"
                           "                           [--warmup 5] [--reps 30] [--no-verify] [--hardware NAME] [--force]\n"
                           "\n"
                           "Output series: gemm_with_copy (GEMM time alone, with the copies, and the copies' rate).\n"
                           "The loop's copy is first probed for SM use (a kernel holds every SM meanwhile); each row\n"
                           "says what it found (copy_on_sms), and calibration leaves rows whose copy was a kernel out.\n"
                           "\n"
                           "Options:\n") +
                   kOutputOptions +
                   "  --device D              CUDA device (default 0)\n"
                   "  --hidden, --ffn, --matrices, --experts, --tokens, --impl   the GEMM, as in bench gemm (BF16)\n"
                   "  --copy-bytes SIZE       bytes per copy of the interfering loop (default 256M)\n"
                   "  --copy-api API          memcpy: cudaMemcpyAsync D2D (within one GPU the driver may run it as a\n"
                   "                          kernel); batch: cudaMemcpyBatchAsync with the hint to overlap with\n"
                   "                          compute (CUDA 12.8+), which asks for a Copy Engine; a hint, ignored\n"
                   "                          on the H200 with driver 580 (default memcpy)\n"
                   "  --warmup N, --reps N    per point (default 5, 30)\n"
                   "  --no-verify             skip the checksum of the copies' data\n" +
                   kHeaderOptions + kExitStatus,
               {"o", "device", "hidden", "ffn", "matrices", "experts", "tokens", "copy-bytes", "copy-api", "impl", "warmup",
                "reps", "hardware"},
               {"force", "no-verify"},
               {"o"},
               ""});
  c.push_back({"bench alltoall",
               "NCCL all-to-all time over bytes per pair (2 or more GPUs)",
               std::string("usage: epsim-hw bench alltoall -o FILE.yaml [--gpus N] [--sizes 4K,...,64M] [--warmup 5]\n"
                           "                           [--reps 30] [--nccl-timeout-s 120] [--no-verify]\n"
                           "                           [--hardware NAME] [--force]\n"
                           "\n"
                           "One process drives every GPU; one all-to-all = ncclSend + ncclRecv of the same bytes\n"
                           "with every other rank in one group. Output series: all_to_all. Needs NCCL.\n"
                           "\n"
                           "Options:\n") +
                   kOutputOptions +
                   "  --gpus N                ranks (default: all visible)\n"
                   "  --sizes LIST            bytes per pair (default 4K,16K,64K,256K,1M,4M,16M,64M)\n"
                   "  --warmup N, --reps N    per size (default 5, 30)\n"
                   "  --nccl-timeout-s S      deadline of every NCCL wait (default 120)\n"
                   "  --no-verify             skip the checksums of the received data\n" +
                   kHeaderOptions + kExitStatus,
               {"o", "gpus", "sizes", "warmup", "reps", "nccl-timeout-s", "hardware"},
               {"force", "no-verify"},
               {"o"},
               ""});
  c.push_back({"bench ep_comm",
               "EP dispatch and combine of DeepEP-benchmark traffic as NCCL all-to-all-v (2 or more GPUs)",
               std::string("usage: epsim-hw bench ep_comm -o FILE.yaml [--gpus N] [--tokens 128,...,4096]\n"
                           "                           [--hidden 7168] [--top-k 8] [--experts 256]\n"
                           "                           [--dtype fp8,bf16] [--seed 1] [--warmup 5] [--reps 30]\n"
                           "                           [--nccl-timeout-s 120] [--no-verify] [--hardware NAME] [--force]\n"
                           "\n"
                           "Every rank routes its tokens to top-k distinct experts drawn uniformly (experts placed\n"
                           "contiguously, rank r holding experts [r*E/N, (r+1)*E/N)); a token is sent once to each\n"
                           "rank holding any of its experts, its own rank included. Dispatch moves those rows in\n"
                           "each --dtype (FP8 rows carry one FP32 scale per 128 channels), combine moves them back\n"
                           "in BF16, each as one grouped ncclSend/ncclRecv all-to-all-v. Output series: ep_comm\n"
                           "(implementation nccl_alltoallv, counted nvlink). Needs NCCL.\n"
                           "\n"
                           "Options:\n") +
                   kOutputOptions +
                   "  --gpus N                ranks (default: all visible)\n"
                   "  --tokens LIST           tokens per rank (default 128,256,512,1024,2048,4096)\n"
                   "  --hidden H              hidden size (default 7168)\n"
                   "  --top-k K               experts per token (default 8)\n"
                   "  --experts E             routed experts, rounded down to a multiple of the ranks (default 256)\n"
                   "  --dtype LIST            dispatch formats, fp8 and/or bf16 (default fp8,bf16); combine is bf16\n"
                   "  --seed S                seed of the routing draw (default 1)\n"
                   "  --warmup N, --reps N    per point (default 5, 30)\n"
                   "  --nccl-timeout-s S      deadline of every NCCL wait (default 120)\n"
                   "  --no-verify             skip the checksums of the received data\n" +
                   kHeaderOptions + kExitStatus,
               {"o", "gpus", "tokens", "hidden", "top-k", "experts", "dtype", "seed", "warmup", "reps",
                "nccl-timeout-s", "hardware"},
               {"force", "no-verify"},
               {"o"},
               ""});
  c.push_back({"run",
               "run one GPU's part of the simulator's plans and record its timeline",
               std::string("usage: epsim-hw run PLANS.jsonl --gpu G -o measured_timeline.json [--device D]\n"
                           "                    [--record N] [--warmup 1] [--hidden 6144] [--ffn 2048] [--matrices 3]\n"
                           "                    [--impl grouped|loop] [--no-verify] [--force]\n"
                           "\n"
                           "PLANS.jsonl comes from `epsim run EXPERIMENT.yaml --write-plans ...`. Plan GPU G's grouped\n"
                           "GEMMs and Copy Engine copies run on one real GPU, timed with CUDA events; the output is a\n"
                           "measured-timeline document that `epsim validate` compares with the simulator.\n"
                           "\n"
                           "Options:\n") +
                   "  -o, --output FILE       the measured timeline to write (required)\n"
                   "  --force                 replace FILE if it exists\n"
                   "  --gpu G                 the plan GPU to run (required)\n"
                   "  --device D              CUDA device (default 0)\n"
                   "  --record N              only the first N plans (default all)\n"
                   "  --warmup N              untimed runs per plan (default 1)\n"
                   "  --hidden, --ffn, --matrices, --impl   the GEMM shapes, as in bench gemm\n"
                   "  --no-verify             skip the checksums of the copies\n" +
                   kExitStatus,
               {"o", "gpu", "device", "record", "warmup", "hidden", "ffn", "matrices", "impl"},
               {"force", "no-verify"},
               {"o", "gpu"},
               "PLANS.jsonl"});
  return c;
}

bool is_help(const std::string& s) { return s == "-h" || s == "--help"; }

std::string bench_kinds() {
  std::string kinds;
  for (const auto& c : hw_commands())
    if (c.name.compare(0, 6, "bench ") == 0) kinds += (kinds.empty() ? "" : ", ") + c.name.substr(6);
  return kinds;
}

std::string bench_overview() {
  std::string text = "usage: epsim-hw bench KIND -o FILE.yaml [options]   (epsim-hw bench KIND --help)\n\nKinds:\n";
  for (const auto& c : hw_commands())
    if (c.name.compare(0, 6, "bench ") == 0) {
      std::string name = c.name.substr(6);
      name.resize(12, ' ');
      text += "  " + name + c.summary + "\n";
    }
  return text;
}

std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/+@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

const std::vector<HwCommand>& hw_commands() {
  static const std::vector<HwCommand> commands = make_commands();
  return commands;
}

std::string hw_overview() {
  std::string text =
      "usage: epsim-hw COMMAND [options]      (epsim-hw COMMAND --help: its options)\n"
      "       epsim-hw --help | --version\n"
      "\nCommands:\n";
  for (const auto& c : hw_commands()) {
    std::string name = c.name;
    name.resize(18, ' ');
    text += "  " + name + c.summary + "\n";
  }
  text += "\nA measurement file feeds `epsim calibrate FILE.yaml --base models/h100-sxm-8.yaml -o OUT.yaml`.\n";
  return text + kExitStatus;
}

HwInvocation parse_invocation(const std::vector<std::string>& argv, const std::string& version) {
  HwInvocation inv;
  if (argv.empty()) throw std::invalid_argument("epsim-hw: missing command (epsim-hw --help lists them)");
  if (is_help(argv[0])) {
    inv.action = HwInvocation::Action::help;
    inv.text = hw_overview();
    return inv;
  }
  if (argv[0] == "--version") {
    inv.action = HwInvocation::Action::version;
    inv.text = version + "\n";
    return inv;
  }
  // The command is one word ("suite", "run") or two ("bench gemm").
  std::size_t words = 1;
  std::string name = argv[0];
  if (name == "bench") {
    if (argv.size() < 2 || argv[1].empty() || argv[1][0] == '-') {
      for (std::size_t i = 1; i < argv.size(); ++i)
        if (is_help(argv[i])) {
          inv.action = HwInvocation::Action::help;
          inv.text = bench_overview();
          return inv;
        }
      throw std::invalid_argument("epsim-hw bench: needs a kind: " + bench_kinds() + " (epsim-hw bench --help)");
    }
    name += " " + argv[1];
    words = 2;
  }
  for (const auto& c : hw_commands())
    if (c.name == name) inv.command = &c;
  if (!inv.command) {
    if (words == 2)
      throw std::invalid_argument("epsim-hw bench: unknown kind '" + argv[1] + "' (" + bench_kinds() + ")");
    throw std::invalid_argument("epsim-hw: unknown command '" + name + "' (epsim-hw --help lists the commands)");
  }
  const HwCommand& c = *inv.command;
  const std::string prefix = "epsim-hw " + c.name + ": ";
  const std::string hint = " (epsim-hw " + c.name + " --help)";
  for (std::size_t i = words; i < argv.size(); ++i)
    if (is_help(argv[i])) {
      inv.action = HwInvocation::Action::help;
      inv.text = c.usage;
      return inv;
    }
  std::vector<std::string> rest{c.name};
  rest.insert(rest.end(), argv.begin() + static_cast<std::ptrdiff_t>(words), argv.end());
  try {
    inv.args = parse_hw_args(rest, c.options, c.switches);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(prefix + e.what() + hint);
  }
  const std::size_t want = c.positional.empty() ? 0 : 1;
  if (inv.args.positional.size() != want) {
    if (want == 0)
      throw std::invalid_argument(prefix + "unexpected argument '" + inv.args.positional[0] + "'" + hint);
    throw std::invalid_argument(prefix + "needs one " + c.positional + hint);
  }
  for (const auto& key : c.required)
    if (!inv.args.has(key))
      throw std::invalid_argument(prefix + "missing " + (key == "o" ? std::string("-o FILE") : "--" + key) + hint);
  inv.args.command_line = "epsim-hw";
  for (const auto& word : argv) inv.args.command_line += " " + shell_word(word);
  return inv;
}

}  // namespace epsim::hw
