#include "hw/cuda/grouped_gemm.cuh"

#include <cstdio>

#include <cuda_bf16.h>

namespace epsim::hw {

GemmImpl parse_gemm_impl(const std::string& text) {
  if (text == "grouped") return GemmImpl::grouped;
  if (text == "loop") return GemmImpl::loop;
  throw std::invalid_argument("--impl: '" + text + "' is not grouped or loop");
}

GemmImplChoice parse_gemm_choice(const std::string& text) {
  if (text == "best") return {GemmImpl::grouped, true};
  if (text == "grouped" || text == "loop") return {parse_gemm_impl(text), false};
  throw std::invalid_argument("--impl: '" + text + "' is not grouped, loop or best");
}

const char* to_string(GemmImpl impl) {
  switch (impl) {
    case GemmImpl::grouped: return "cublasGemmGroupedBatchedEx";
    case GemmImpl::loop: return "cublasGemmEx loop";
    case GemmImpl::lt_fp8_loop: return "cublasLtMatmul FP8 E4M3 loop";
  }
  return "?";
}

std::string implementations_text(const std::map<GemmImpl, int>& wins) {
  if (wins.size() == 1) return to_string(wins.begin()->first);
  std::string text = "the faster per point:";
  const char* sep = " ";
  for (const auto& [impl, n] : wins) {
    text += sep + std::string(to_string(impl)) + " at " + std::to_string(n) + " points";
    sep = ", ";
  }
  return text;
}

bool fp8_gemm_capable(int device) {
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major > 8 || (major == 8 && minor >= 9);
}

namespace {
std::size_t up_cols(int ffn, int matrices) { return static_cast<std::size_t>(matrices > 1 ? matrices - 1 : 1) * ffn; }
}  // namespace

GroupedGemm::GroupedGemm(int hidden, int ffn, int matrices, int max_experts, std::int64_t max_total_tokens,
                         GemmImpl impl, cudaStream_t stream, Dtype dtype)
    : hidden_(hidden), ffn_(ffn), matrices_(matrices), max_experts_(max_experts), max_tokens_(max_total_tokens),
      impl_(dtype == Dtype::fp8 ? GemmImpl::lt_fp8_loop : impl), dtype_(dtype), stream_(stream) {
  if (hidden < 1 || ffn < 1 || matrices < 1 || max_experts < 1 || max_total_tokens < 1)
    throw std::invalid_argument("GroupedGemm: sizes must be >= 1");
  if (dtype != Dtype::bf16 && dtype != Dtype::fp8)
    throw std::invalid_argument(std::string("GroupedGemm: dtype ") + to_string(dtype) + " (bf16 or fp8)");
  if (dtype == Dtype::fp8) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    if (!fp8_gemm_capable(device))
      throw Fp8Unavailable("FP8 GEMMs need compute capability 8.9 or above (device " + std::to_string(device) + ")");
    if (hidden % 16 != 0 || ffn % 16 != 0)
      throw std::invalid_argument("FP8 GEMMs need --hidden and --ffn multiples of 16 (cuBLASLt FP8 alignment)");
  }
  const std::size_t elem = static_cast<std::size_t>(element_bytes(dtype));
  const std::size_t per_expert = static_cast<std::size_t>(matrices) * hidden * ffn;  // elements
  weights_ = DeviceBuffer(per_expert * max_experts * elem);
  input_ = DeviceBuffer(static_cast<std::size_t>(max_total_tokens) * hidden * elem);
  middle_ = DeviceBuffer(static_cast<std::size_t>(max_total_tokens) * up_cols(ffn, matrices) * 2);
  output_ = DeviceBuffer(static_cast<std::size_t>(max_total_tokens) * hidden * 2);
  CUDA_CHECK(cudaStreamCreateWithFlags(&upload_, cudaStreamNonBlocking));
  workspace_ = DeviceBuffer(64u << 20);
  if (dtype == Dtype::fp8) {
    middle_fp8_ = DeviceBuffer(static_cast<std::size_t>(max_total_tokens) * up_cols(ffn, matrices));
    fill_fp8(weights_.get(), per_expert * max_experts, 1, stream);
    fill_fp8(input_.get(), static_cast<std::uint64_t>(max_total_tokens) * hidden, 2, stream);
    fill_fp8(middle_fp8_.get(), static_cast<std::uint64_t>(max_total_tokens) * up_cols(ffn, matrices), 3, stream);
    CUBLAS_CHECK(cublasLtCreate(&lt_));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  pointers_ = DeviceBuffer(sizeof(void*) * 3 * kSlots * static_cast<std::size_t>(max_experts));
  fill_bf16(weights_.get(), per_expert * max_experts, 1, stream);
  fill_bf16(input_.get(), static_cast<std::uint64_t>(max_total_tokens) * hidden, 2, stream);
  CUBLAS_CHECK(cublasCreate(&handle_));
  CUBLAS_CHECK(cublasSetStream(handle_, stream));
  CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.get(), workspace_.size()));
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

GroupedGemm::~GroupedGemm() {
  for (auto& entry : lt_plans_) {
    LtPlan& p = entry.second;
    if (p.a) CUBLAS_CHECK_CLEANUP(cublasLtMatrixLayoutDestroy(p.a));
    if (p.b) CUBLAS_CHECK_CLEANUP(cublasLtMatrixLayoutDestroy(p.b));
    if (p.d) CUBLAS_CHECK_CLEANUP(cublasLtMatrixLayoutDestroy(p.d));
    if (p.op) CUBLAS_CHECK_CLEANUP(cublasLtMatmulDescDestroy(p.op));
  }
  if (lt_) CUBLAS_CHECK_CLEANUP(cublasLtDestroy(lt_));
  if (handle_) CUBLAS_CHECK_CLEANUP(cublasDestroy(handle_));
  if (upload_) CUDA_CHECK_CLEANUP(cudaStreamDestroy(upload_));
}

void GroupedGemm::set_stream(cudaStream_t s) {
  stream_ = s;
  if (handle_) CUBLAS_CHECK(cublasSetStream(handle_, s));
}

void GroupedGemm::set_impl(GemmImpl impl) {
  if (dtype_ == Dtype::fp8 || impl == GemmImpl::lt_fp8_loop) return;
  impl_ = grouped_refused_ ? GemmImpl::loop : impl;
}

int GroupedGemm::calls_per_enqueue(const std::vector<std::int64_t>& tokens) const {
  const int projections = matrices_ > 1 ? 2 : 1;
  if (impl_ == GemmImpl::grouped && dtype_ != Dtype::fp8) return projections;
  int active = 0;
  for (auto t : tokens) active += t > 0 ? 1 : 0;
  return projections * active;
}

void GroupedGemm::enqueue(const std::vector<std::int64_t>& tokens) {
  if (static_cast<int>(tokens.size()) > max_experts_)
    throw std::invalid_argument("GroupedGemm: " + std::to_string(tokens.size()) + " experts > " +
                                std::to_string(max_experts_) + " allocated");
  std::vector<int> experts;
  std::vector<std::int64_t> rows, offsets;
  std::int64_t total = 0;
  for (std::size_t e = 0; e < tokens.size(); ++e) {
    if (tokens[e] <= 0) continue;
    experts.push_back(static_cast<int>(e));
    rows.push_back(tokens[e]);
    offsets.push_back(total);
    total += tokens[e];
  }
  if (total > max_tokens_)
    throw std::invalid_argument("GroupedGemm: " + std::to_string(total) + " tokens > " +
                                std::to_string(max_tokens_) + " allocated");
  if (experts.empty()) return;
  const int up = static_cast<int>(up_cols(ffn_, matrices_));
  if (dtype_ == Dtype::fp8) {
    enqueue_fp8(experts, rows, offsets, up, hidden_, 0);
    if (matrices_ > 1) enqueue_fp8(experts, rows, offsets, hidden_, ffn_, 1);
    return;
  }
  enqueue_projection(experts, rows, offsets, up, hidden_, 0);       // up (+gate): N = (m-1)F, K = H
  if (matrices_ > 1) enqueue_projection(experts, rows, offsets, hidden_, ffn_, 1);  // down: N = H, K = F
}

// FP8 in cuBLASLt's TN layout, column-major view of row-major C[M x N] = A[M x K] * W[K x N]:
// D (N x M, ldd N) = op_T(W') (N x K) * A^T (K x M), W' stored K x N column-major (ld K, i.e. [N x K]
// row-major: every output column's K weights contiguous), A^T stored K x M (ld K: the row-major
// activations as they are). Scales stay at their default of 1.
const GroupedGemm::LtPlan& GroupedGemm::lt_plan(int n, int k, std::int64_t m) {
  const auto key = std::make_tuple(n, k, m);
  auto it = lt_plans_.find(key);
  if (it != lt_plans_.end()) return it->second;
  LtPlan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k),
                                          static_cast<std::uint64_t>(n), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, static_cast<std::uint64_t>(k),
                                          static_cast<std::uint64_t>(m), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.d, CUDA_R_16BF, static_cast<std::uint64_t>(n),
                                          static_cast<std::uint64_t>(m), n));
  cublasLtMatmulPreference_t pref{};
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t ws = workspace_.size();
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt_, p.op, p.a, p.b, p.d, p.d, pref, 1, &result, &found);
  CUBLAS_CHECK_CLEANUP(cublasLtMatmulPreferenceDestroy(pref));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0)) {
    CUBLAS_CHECK_CLEANUP(cublasLtMatrixLayoutDestroy(p.a));
    CUBLAS_CHECK_CLEANUP(cublasLtMatrixLayoutDestroy(p.b));
    CUBLAS_CHECK_CLEANUP(cublasLtMatrixLayoutDestroy(p.d));
    CUBLAS_CHECK_CLEANUP(cublasLtMatmulDescDestroy(p.op));
    throw Fp8Unavailable("cuBLASLt offers no FP8 E4M3 algorithm for N " + std::to_string(n) + ", K " +
                         std::to_string(k) + ", M " + std::to_string(m) + " on this device");
  }
  CUBLAS_CHECK(st);
  p.algo = result.algo;
  return lt_plans_.emplace(key, p).first->second;
}

void GroupedGemm::enqueue_fp8(const std::vector<int>& experts, const std::vector<std::int64_t>& tokens,
                              const std::vector<std::int64_t>& offsets, int n, int k, int weight_index) {
  const std::size_t per_expert = static_cast<std::size_t>(matrices_) * hidden_ * ffn_;  // bytes (1 per element)
  const std::size_t up_elems = static_cast<std::size_t>(hidden_) * up_cols(ffn_, matrices_);
  const auto* w = static_cast<const std::uint8_t*>(weights_.get());
  const auto* in = static_cast<const std::uint8_t*>(weight_index == 0 ? input_.get() : middle_fp8_.get());
  auto* out = static_cast<__nv_bfloat16*>(weight_index == 0 ? middle_.get() : output_.get());
  const float alpha = 1.0f, beta = 0.0f;
  for (std::size_t i = 0; i < experts.size(); ++i) {
    const LtPlan& p = lt_plan(n, k, tokens[i]);
    const void* a = w + per_expert * static_cast<std::size_t>(experts[i]) + (weight_index == 0 ? 0 : up_elems);
    const void* b = in + static_cast<std::size_t>(offsets[i]) * static_cast<std::size_t>(k);
    void* d = out + static_cast<std::size_t>(offsets[i]) * static_cast<std::size_t>(n);
    CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &alpha, a, p.a, b, p.b, &beta, d, p.d, d, p.d, &p.algo, workspace_.get(),
                                workspace_.size(), stream_));
  }
}

// Column-major cuBLAS view of row-major C[M x N] = A[M x K] * W[K x N]: C^T (N x M) = W^T (N x K) * A^T
// (K x M), i.e. m = N, n = M, k = K, lda = N, ldb = K, ldc = N, no transposes.
void GroupedGemm::enqueue_projection(const std::vector<int>& experts, const std::vector<std::int64_t>& tokens,
                                     const std::vector<std::int64_t>& offsets, int n, int k, int weight_index) {
  const std::size_t per_expert = static_cast<std::size_t>(matrices_) * hidden_ * ffn_;
  const std::size_t up_elems = static_cast<std::size_t>(hidden_) * up_cols(ffn_, matrices_);
  auto* w = static_cast<__nv_bfloat16*>(weights_.get());
  auto* in = static_cast<__nv_bfloat16*>(weight_index == 0 ? input_.get() : middle_.get());
  auto* out = static_cast<__nv_bfloat16*>(weight_index == 0 ? middle_.get() : output_.get());
  const int g = static_cast<int>(experts.size());
  std::vector<const void*> a(g), b(g);
  std::vector<void*> c(g);
  for (int i = 0; i < g; ++i) {
    a[i] = w + per_expert * experts[i] + (weight_index == 0 ? 0 : up_elems);
    b[i] = in + static_cast<std::size_t>(offsets[i]) * k;
    c[i] = out + static_cast<std::size_t>(offsets[i]) * n;
  }
  const float alpha = 1.0f, beta = 0.0f;
  if (impl_ == GemmImpl::loop) {
    for (int i = 0; i < g; ++i)
      CUBLAS_CHECK(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, static_cast<int>(tokens[i]), k, &alpha, a[i],
                                CUDA_R_16BF, n, b[i], CUDA_R_16BF, k, &beta, c[i], CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
    return;
  }
  // Grouped: one group per expert (each has its own M); the pointer arrays live in device memory.
  // Each distinct table is uploaded once, synchronously on a private stream (so an enqueue behind a
  // SpinGate never waits), and reused from then on.
  std::vector<const void*> host_ptrs(3 * static_cast<std::size_t>(g));
  for (int i = 0; i < g; ++i) {
    host_ptrs[i] = a[i];
    host_ptrs[g + i] = b[i];
    host_ptrs[2 * g + i] = c[i];
  }
  auto it = slots_.find(host_ptrs);
  if (it == slots_.end()) {
    if (slots_.size() >= kSlots) {
      CUDA_CHECK(cudaStreamSynchronize(stream_));  // no enqueued GEMM may still read a table
      slots_.clear();
    }
    const std::size_t slot = slots_.size();
    auto** target = static_cast<const void**>(pointers_.get()) + slot * 3 * max_experts_;
    CUDA_CHECK(cudaMemcpyAsync(target, host_ptrs.data(), sizeof(void*) * host_ptrs.size(), cudaMemcpyHostToDevice,
                               upload_));
    CUDA_CHECK(cudaStreamSynchronize(upload_));
    it = slots_.emplace(host_ptrs, slot).first;
  }
  auto** dev = static_cast<const void**>(pointers_.get()) + it->second * 3 * max_experts_;
  std::vector<cublasOperation_t> ops(g, CUBLAS_OP_N);
  std::vector<int> ms(g, n), ns(g), ks(g, k), lda(g, n), ldb(g, k), ldc(g, n), sizes(g, 1);
  for (int i = 0; i < g; ++i) ns[i] = static_cast<int>(tokens[i]);
  std::vector<float> alphas(g, alpha), betas(g, beta);
  const cublasStatus_t st = cublasGemmGroupedBatchedEx(
      handle_, ops.data(), ops.data(), ms.data(), ns.data(), ks.data(), alphas.data(), dev, CUDA_R_16BF, lda.data(),
      dev + g, CUDA_R_16BF, ldb.data(), betas.data(),
      const_cast<void* const*>(reinterpret_cast<const void* const*>(dev + 2 * g)), CUDA_R_16BF, ldc.data(), g,
      sizes.data(), CUBLAS_COMPUTE_32F);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE || st == CUBLAS_STATUS_ARCH_MISMATCH) {
    // This cuBLAS refuses BF16 grouped GEMM here: fall back to the per-expert loop for good.
    std::fprintf(stderr, "epsim-hw: cublasGemmGroupedBatchedEx returned %s (%s); falling back to a cublasGemmEx loop\n",
                 cublasGetStatusName(st), cublasGetStatusString(st));
    impl_ = GemmImpl::loop;
    grouped_refused_ = true;
    enqueue_projection(experts, tokens, offsets, n, k, weight_index);
    return;
  }
  CUBLAS_CHECK(st);
}

}  // namespace epsim::hw
