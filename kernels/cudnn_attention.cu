// cuDNN's fused flash attention through the backend graph API (cudnn_graph.h); the contract and the
// determinism note are in cudnn_attention.h.
//
// The graphs are the SDPA pattern that cuDNN's fused engine recognises, with Q (B,H,T,64), K^T (B,H,64,T)
// and V as strided views into qkv (row stride 3C, head stride 64), S the (B,H,T,T) scores (never stored):
//   forward:  S = Q K^T * 1/8, causal: S = (row >= col) ? S : -inf (gen_index, cmp_ge, binary_select);
//             m = rowmax S, E = exp(S - m), l = rowsum E, lse = m + log l (cuDNN's softmax "stats": the
//             natural-log logsumexp of the scaled scores, our lse exactly), P = E / l in bf16, O = P V.
//   backward: D = rowsum(dO * O) (a real tensor: scratch), P = exp(Q K^T * 1/8 - lse) with the same mask,
//             dV = P^T dO, dS = P * (dO V^T - D) * 1/8, dK = dS^T Q, dQ = dS K (deterministic) or dQ into an
//             fp32 dQ_accum in the workspace and copied out (cuDNN's atomic backward).
// Intermediate tensors are virtual and fp32 unless noted; P^T and dS^T are bf16 transposing views
// (reshape). The 1/8, 1 and -inf are scalars passed by value.
#include <cudnn.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "common/cuda_check.h"
#include "common/device_buffer.h"
#include "kernels/attention_kind.h"
#include "kernels/cudnn_attention.h"

namespace {

// A cuDNN failure: the call site (file:line), what was being built, cuDNN's status and its last message.
void cudnn_check(cudnnStatus_t st, const char* what, const char* file, int line) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  char msg[1024] = "";
  cudnnGetLastErrorString(msg, sizeof msg);
  throw CudaError(str_cat(file, ":", line, ": ", what, ": cuDNN status ", int(st), " (", cudnnGetErrorString(st), ")",
                          msg[0] ? ": " : "", msg));
}
#define CUDNN_CHECK(call) cudnn_check((call), #call, __FILE__, __LINE__)

// One backend descriptor, destroyed with its owner. set() and finalize() report their caller's file:line
// and the descriptor's name.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
    CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(Desc&& o) noexcept : d_(o.d_), name_(std::move(o.name_)) { o.d_ = nullptr; }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

  template <class T>
  Desc& set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, const T* values, int64_t count = 1,
            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    cudnn_check(cudnnBackendSetAttribute(d_, attr, type, count, values),
                str_cat("setting attribute ", int(attr), " of ", name_).c_str(), file, line);
    return *this;
  }
  Desc& set(cudnnBackendAttributeName_t attr, cudnnBackendDescriptor_t d, const char* file = __builtin_FILE(),
            int line = __builtin_LINE()) {
    return set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, &d, 1, file, line);
  }
  Desc& finalize(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    cudnn_check(cudnnBackendFinalize(d_), str_cat("finalizing ", name_).c_str(), file, line);
    return *this;
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string name_;
};

using Dims = std::array<int64_t, 4>;
Dims packed(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

struct Tensor {
  cudnnBackendDescriptor_t desc = nullptr;  // null: none (an absent input, or an output to make)
  Dims dims{};
};

// The real tensors' uids (the variant pack's keys); virtual tensors are numbered after them.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kLse,
  kDO,
  kDQ,
  kDK,
  kDV,
  kD,
  kDQAccum,
  kScale,
  kOne,
  kNegInf,
  kVirtual = 100
};

// An operation graph under construction: it owns every descriptor, and lists the operations in order.
class Graph {
 public:
  // A tensor in memory (uid in the variant pack) or a scalar passed by value.
  Tensor real(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type) { return make(uid, dims, strides, type); }
  Tensor scalar(int64_t uid) { return make(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true); }
  Tensor virt(Dims dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) { return virt(dims, packed(dims), type); }
  Tensor virt(Dims dims, Dims strides, cudnnDataType_t type) { return make(next_++, dims, strides, type, true); }

  // y = mode(x[, b[, t]]); y by default a virtual fp32 tensor of the broadcast shape.
  Tensor pointwise(const char* name, cudnnPointwiseMode_t mode, Tensor x, Tensor b = {}, Tensor t = {}, Tensor y = {},
                   cudnnDataType_t prec = CUDNN_DATA_FLOAT, int64_t axis = -1);
  Tensor matmul(const char* name, Tensor a, Tensor b, Tensor c = {});
  // Reduces the last dimension: (B,H,T,n) -> (B,H,T,1).
  Tensor reduce(const char* name, cudnnReduceTensorOp_t op, Tensor x, Tensor y = {});
  // y: the same elements under other dims and strides (here, transposes).
  Tensor reshape(const char* name, Tensor x, Tensor y);
  // The causal mask: scores of keys after the query become -inf.
  Tensor causal(Tensor s, Tensor neg_inf);
  Desc finalize(cudnnHandle_t h) const;

 private:
  Tensor make(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type, bool is_virtual = false,
              bool by_value = false);
  Desc& keep(cudnnBackendDescriptorType_t type, const std::string& name) { return descs_.emplace_back(type, name); }
  Desc& op(cudnnBackendDescriptorType_t type, const std::string& name) {
    Desc& d = keep(type, name);
    ops_.push_back(d.get());
    return d;
  }
  std::deque<Desc> descs_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_ = kVirtual;
};

Tensor Graph::make(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type, bool is_virtual, bool by_value) {
  const int64_t align = 16;
  Desc& d = keep(CUDNN_BACKEND_TENSOR_DESCRIPTOR, str_cat("tensor ", uid));
  d.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
      .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
      .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
      .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
      .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align)
      .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
  if (by_value) d.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
  d.finalize();
  return {d.get(), dims};
}

Tensor Graph::pointwise(const char* name, cudnnPointwiseMode_t mode, Tensor x, Tensor b, Tensor t, Tensor y,
                        cudnnDataType_t prec, int64_t axis) {
  Desc& pw = keep(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, str_cat("pointwise descriptor ", name));
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
      .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
  if (mode == CUDNN_POINTWISE_GEN_INDEX) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
  pw.finalize();
  if (!y.desc) {
    Dims d = x.dims;
    for (int i = 0; i < 4 && b.desc; i++) d[i] = std::max(d[i], b.dims[i]);
    y = virt(d);
  }
  const float one = 1.0f;
  Desc& o = op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, str_cat("pointwise ", name));
  o.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get())
      .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x.desc)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y.desc);
  if (b.desc) o.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b.desc);
  if (t.desc) o.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t.desc);
  o.set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one)
      .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one)
      .finalize();
  return y;
}

Tensor Graph::matmul(const char* name, Tensor a, Tensor b, Tensor c) {
  const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  Desc& mm = keep(CUDNN_BACKEND_MATMUL_DESCRIPTOR, str_cat("matmul descriptor ", name));
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32).finalize();
  if (!c.desc) c = virt({a.dims[0], a.dims[1], a.dims[2], b.dims[3]});
  op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, str_cat("matmul ", name))
      .set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a.desc)
      .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b.desc)
      .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c.desc)
      .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm.get())
      .finalize();
  return c;
}

Tensor Graph::reduce(const char* name, cudnnReduceTensorOp_t reduce_op, Tensor x, Tensor y) {
  const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  Desc& r = keep(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, str_cat("reduction descriptor ", name));
  r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &reduce_op)
      .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32)
      .finalize();
  if (!y.desc) y = virt({x.dims[0], x.dims[1], x.dims[2], 1});
  op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, str_cat("reduction ", name))
      .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x.desc)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y.desc)
      .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r.get())
      .finalize();
  return y;
}

Tensor Graph::reshape(const char* name, Tensor x, Tensor y) {
  op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, str_cat("reshape ", name))
      .set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x.desc)
      .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y.desc)
      .finalize();
  return y;
}

Tensor Graph::causal(Tensor s, Tensor neg_inf) {
  Tensor row =
      pointwise("row index", CUDNN_POINTWISE_GEN_INDEX, s, {}, {}, virt(s.dims, CUDNN_DATA_INT32), CUDNN_DATA_FLOAT, 2);
  Tensor col = pointwise("column index", CUDNN_POINTWISE_GEN_INDEX, s, {}, {}, virt(s.dims, CUDNN_DATA_INT32),
                         CUDNN_DATA_FLOAT, 3);
  Tensor keep = pointwise("row >= column", CUDNN_POINTWISE_CMP_GE, row, col, {}, virt(s.dims, CUDNN_DATA_BOOLEAN),
                          CUDNN_DATA_BOOLEAN);
  return pointwise("causal mask", CUDNN_POINTWISE_BINARY_SELECT, s, neg_inf, keep);  // keep ? s : -inf
}

Desc Graph::finalize(cudnnHandle_t h) const {
  Desc g(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &h)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(), int64_t(ops_.size()))
      .finalize();
  return g;
}

struct Shape {
  int64_t B, H, T;
  bool causal;
  int64_t C() const { return H * 64; }
  // (B, H, T, 64) views of one column block of qkv (row stride 3C) and of out / dout (row stride C), and
  // K^T, V^T as (B, H, 64, T) views of qkv.
  Dims heads() const { return {B, H, T, 64}; }
  Dims qkv_strides() const { return {T * 3 * C(), 64, 3 * C(), 1}; }
  Dims out_strides() const { return {T * C(), 64, C(), 1}; }
  Dims transposed() const { return {B, H, 64, T}; }
  Dims transposed_strides() const { return {T * 3 * C(), 64, 1, 3 * C()}; }
  Dims rows() const { return {B, H, T, 1}; }  // one value per (b, h, query): lse, D
};

void forward_graph(Graph& g, const Shape& s) {
  const cudnnDataType_t bf16_t = CUDNN_DATA_BFLOAT16, fp32 = CUDNN_DATA_FLOAT;
  Tensor q = g.real(kQ, s.heads(), s.qkv_strides(), bf16_t);
  Tensor kt = g.real(kK, s.transposed(), s.transposed_strides(), bf16_t);
  Tensor v = g.real(kV, s.heads(), s.qkv_strides(), bf16_t);
  Tensor o = g.real(kO, s.heads(), s.out_strides(), bf16_t);
  Tensor lse = g.real(kLse, s.rows(), packed(s.rows()), fp32);
  Tensor scale = g.scalar(kScale);
  Tensor sc = g.pointwise("S / 8", CUDNN_POINTWISE_MUL, g.matmul("Q K^T", q, kt), scale);
  if (s.causal) sc = g.causal(sc, g.scalar(kNegInf));
  Tensor m = g.reduce("row max", CUDNN_REDUCE_TENSOR_MAX, sc);
  Tensor e = g.pointwise("exp", CUDNN_POINTWISE_EXP, g.pointwise("S - m", CUDNN_POINTWISE_SUB, sc, m));
  Tensor l = g.reduce("row sum", CUDNN_REDUCE_TENSOR_ADD, e);
  g.pointwise("lse = m + log l", CUDNN_POINTWISE_ADD, m, g.pointwise("log", CUDNN_POINTWISE_LOG, l), {}, lse);
  Tensor p = g.pointwise("P = E / l", CUDNN_POINTWISE_DIV, e, l, {}, g.virt({s.B, s.H, s.T, s.T}, bf16_t));
  g.matmul("P V", p, v, o);
}

void backward_graph(Graph& g, const Shape& s, bool deterministic) {
  const cudnnDataType_t bf16_t = CUDNN_DATA_BFLOAT16, fp32 = CUDNN_DATA_FLOAT;
  const int64_t B = s.B, H = s.H, T = s.T;
  Tensor q = g.real(kQ, s.heads(), s.qkv_strides(), bf16_t);
  Tensor kt = g.real(kK, s.transposed(), s.transposed_strides(), bf16_t);
  Tensor vt = g.real(kV, s.transposed(), s.transposed_strides(), bf16_t);
  Tensor o = g.real(kO, s.heads(), s.out_strides(), bf16_t);
  Tensor dout = g.real(kDO, s.heads(), s.out_strides(), bf16_t);
  Tensor lse = g.real(kLse, s.rows(), packed(s.rows()), fp32);
  Tensor dq = g.real(kDQ, s.heads(), s.qkv_strides(), bf16_t);
  Tensor dk = g.real(kDK, s.heads(), s.qkv_strides(), bf16_t);
  Tensor dv = g.real(kDV, s.heads(), s.qkv_strides(), bf16_t);
  Tensor scale = g.scalar(kScale);
  // D = rowsum(dO * O), kept in memory (the scratch buffer)
  Tensor prod =
      g.pointwise("dO * O", CUDNN_POINTWISE_MUL, dout, o, {}, g.virt(s.heads(), {H * T * 64, T * 64, H * 64, 1}, fp32));
  Tensor d = g.real(kD, s.rows(), packed(s.rows()), fp32);
  g.pointwise("D", CUDNN_POINTWISE_MUL, g.reduce("rowsum dO * O", CUDNN_REDUCE_TENSOR_ADD, prod), g.scalar(kOne), {},
              d);
  // P = exp(Q K^T / 8 - lse), masked as in the forward
  Tensor sc = g.pointwise("S / 8", CUDNN_POINTWISE_MUL, g.matmul("Q K^T", q, kt), scale);
  sc = g.pointwise("S - lse", CUDNN_POINTWISE_SUB, sc, lse);
  if (s.causal) sc = g.causal(sc, g.scalar(kNegInf));
  Tensor p = g.pointwise("P", CUDNN_POINTWISE_EXP, sc);
  const Dims tt = {B, H, T, T}, tt_transposed = {H * T * T, T * T, 1, T};
  g.matmul("dV = P^T dO", g.reshape("P^T", p, g.virt(tt, tt_transposed, bf16_t)), dout, dv);
  // dS = P * (dO V^T - D) / 8
  Tensor dp = g.pointwise("dP - D", CUDNN_POINTWISE_SUB, g.matmul("dO V^T", dout, vt), d);
  Tensor ds =
      g.pointwise("dS / 8", CUDNN_POINTWISE_MUL, g.pointwise("P * (dP - D)", CUDNN_POINTWISE_MUL, dp, p), scale);
  g.matmul("dK = dS^T Q", g.reshape("dS^T", ds, g.virt(tt, tt_transposed, bf16_t)), q, dk);
  Tensor k = g.reshape("K", kt, g.virt(s.heads(), s.qkv_strides(), fp32));
  if (deterministic) {
    g.matmul("dQ = dS K", ds, k, dq);  // dQ in one matmul: cuDNN's dP-workspace backward, no atomics
  } else {
    Tensor acc = g.real(kDQAccum, s.heads(), packed(s.heads()), fp32);
    g.pointwise("dQ", CUDNN_POINTWISE_IDENTITY, g.matmul("dQ_accum = dS K", ds, k, acc), {}, {}, dq);
  }
}

// Bytes rounded up to 256, the alignment of the pieces of the workspace.
int64_t aligned(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// A graph with its execution plan: the engine chosen, the workspace it needs and what cuDNN notes about it.
struct Plan {
  Graph graph;
  std::unique_ptr<Desc> op_graph, config, plan;
  int64_t workspace = 0;  // the engine's bytes
  int64_t accum = 0;      // the atomic backward's fp32 dQ accumulator, after the engine's bytes
  std::string info;
  int64_t total() const { return aligned(workspace) + accum; }
};

// What cuDNN says of an engine configuration's engine: its index and its numerical and behaviour notes
// (information only: a failed query leaves its part out).
std::string engine_info(cudnnBackendDescriptor_t cfg) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
  cudnnBackendDescriptor_t e = engine.get();
  int64_t n = 0, index = -1, nn = 0, nb = 0;
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  std::array<cudnnBackendBehaviorNote_t, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT> behaviour{};
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e) !=
      CUDNN_STATUS_SUCCESS)
    return "engine unknown";
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index)) index = -1;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE, notes.size(), &nn,
                               notes.data()))
    nn = 0;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, behaviour.size(), &nb,
                               behaviour.data()))
    nb = 0;
  std::string s = str_cat("engine ", index);
  for (int64_t i = 0; i < nn; i++) {
    if (notes[size_t(i)] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) s += ", nondeterministic";
    if (notes[size_t(i)] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE) s += ", tensor cores";
  }
  for (int64_t i = 0; i < nb; i++)
    if (behaviour[size_t(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) s += ", compiled at run time";
  return s;
}

// The first of the heuristic's engine configurations (mode A, then the fallback list) that finalizes
// into an execution plan for p.op_graph; false when none does.
bool choose_engine(cudnnHandle_t h, Plan& p) {
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
    heur.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, p.op_graph->get())
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) continue;  // no engine in this mode
    int64_t n = 0;
    CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                         &n, nullptr));
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < n; i++)
      raw.push_back(cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config").get());
    CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n,
                                         &n, raw.data()));
    for (int64_t i = 0; i < n; i++) {
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[size_t(i)]);
      if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) continue;  // this engine cannot: the next
      int64_t got = 0;
      CUDNN_CHECK(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                           &got, &p.workspace));
      p.info = engine_info(raw[size_t(i)]);
      p.config = std::make_unique<Desc>(std::move(cfgs[size_t(i)]));  // kept while the plan lives
      p.plan = std::move(plan);
      return true;
    }
  }
  return false;
}

// Runs a plan on the given tensors (uids and pointers in step), with the workspace.
void execute(cudnnHandle_t h, const Plan& p, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
             void* workspace, cudaStream_t s) {
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), int64_t(uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(), int64_t(ptrs.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace)
      .finalize();
  CUDNN_CHECK(cudnnSetStream(h, s));
  CUDNN_CHECK(cudnnBackendExecute(h, p.plan->get(), pack.get()));
}

// The scalars passed by value (host memory, read when a plan runs).
const float kScaleValue = 0.125f;  // 1 / sqrt(64)
const float kOneValue = 1.0f;
// The masked score: -inf from cuDNN 9.10 on; before it, cuDNN's softmax wanted the lowest finite float.
const float* neg_inf_value() {
  static const float v =
      cudnnGetVersion() >= 91000 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
  return &v;
}
}  // namespace

struct CudnnAttention::Impl {
  cudnnHandle_t handle = nullptr;
  std::map<std::tuple<int64_t, int64_t, int64_t, bool, bool>, std::unique_ptr<Plan>> plans;  // B, T, NH, causal, bwd
  std::vector<std::string> built;  // one line per plan, in the order built
  DeviceBuffer<unsigned char> workspace;
  ~Impl() {
    plans.clear();  // the plans before the handle they were made with
    if (handle) cudnnDestroy(handle);
  }
  const Plan& plan(const Shape& s, bool backward, bool deterministic);
};

// The plan of a shape and direction, built and cached on its first use (the workspace grows to fit it then,
// never inside a captured CUDA graph: the trainers capture from the second step on).
const Plan& CudnnAttention::Impl::plan(const Shape& s, bool backward, bool deterministic) {
  const auto key = std::make_tuple(s.B, s.T, s.H, s.causal, backward);
  if (auto it = plans.find(key); it != plans.end()) return *it->second;
  const auto start = std::chrono::steady_clock::now();
  auto p = std::make_unique<Plan>();
  if (backward)
    backward_graph(p->graph, s, deterministic);
  else
    forward_graph(p->graph, s);
  p->op_graph = std::make_unique<Desc>(p->graph.finalize(handle));
  const std::string what = str_cat(backward ? "backward" : "forward", " B=", s.B, " T=", s.T, " NH=", s.H,
                                   s.causal ? " causal" : " non-causal");
  if (!choose_engine(handle, *p))
    user_error("cuDNN ", cudnnGetVersion(), " has no engine for the attention ", what, "; use --attention ours.");
  if (backward && !deterministic) p->accum = s.B * s.H * s.T * 64 * int64_t(sizeof(float));
  if (workspace.bytes() < size_t(p->total())) workspace.alloc(size_t(p->total()), "the cuDNN attention workspace");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const int64_t ws = p->total();
  built.push_back(str_cat(what, ": ", p->info, ", workspace ", ws < (1 << 20) ? ws : ws >> 20,
                          ws < (1 << 20) ? " bytes" : " MiB", ", built in ", int64_t(ms), " ms"));
  return *(plans[key] = std::move(p));
}

namespace {
void check_args(const char* who, int B, int T, int NH, std::initializer_list<const void*> pointers) {
  if (B < 1 || T < 1 || NH < 1)
    user_error(who, ": B, T and NH must all be at least 1 (got B=", B, ", T=", T, ", NH=", NH, ").");
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      user_error(who, ": every buffer must be 16-byte aligned (cudaMalloc'd buffers are).");
}
}  // namespace

CudnnAttention::CudnnAttention(bool deterministic) : deterministic_(deterministic), impl_(std::make_unique<Impl>()) {
  CUDNN_CHECK(cudnnCreate(&impl_->handle));
}
CudnnAttention::~CudnnAttention() = default;

int CudnnAttention::version() { return int(cudnnGetVersion()); }

std::string CudnnAttention::backward_refusal(int T, bool causal) {
  return cudnn_backward_refusal(version(), T, causal);
}

std::string CudnnAttention::plans() const {
  std::string s;
  for (const std::string& line : impl_->built) s += line + "\n";
  return s;
}

void CudnnAttention::forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int NH, bool causal,
                             cudaStream_t s) {
  check_args("cuDNN attention forward", B, T, NH, {out, lse, qkv});
  const Shape sh{B, NH, T, causal};
  const Plan& p = impl_->plan(sh, false, deterministic_);
  bf16* x = const_cast<bf16*>(qkv);  // the variant pack takes void*; cuDNN only reads inputs
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kLse, kScale};
  std::vector<void*> ptrs = {x, x + sh.C(), x + 2 * sh.C(), out, lse, const_cast<float*>(&kScaleValue)};
  if (causal) uids.push_back(kNegInf), ptrs.push_back(const_cast<float*>(neg_inf_value()));
  execute(impl_->handle, p, uids, ptrs, impl_->workspace.get(), s);
}

void CudnnAttention::backward(bf16* dqkv, const bf16* dout, const bf16* out, const float* lse, const bf16* qkv,
                              float* scratch, int B, int T, int NH, bool causal, cudaStream_t s) {
  const char* who = "cuDNN attention backward";
  check_args(who, B, T, NH, {dqkv, dout, out, lse, qkv, scratch});
  const std::string refusal = backward_refusal(T, causal);
  if (!refusal.empty()) user_error(who, ": ", refusal);
  const Shape sh{B, NH, T, causal};
  const Plan& p = impl_->plan(sh, true, deterministic_);
  const int64_t C = sh.C();
  auto in = [](const void* q) { return const_cast<void*>(q); };  // cuDNN only reads inputs
  const bf16* x = qkv;
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kDO, kLse, kDQ, kDK, kDV, kD, kScale, kOne};
  std::vector<void*> ptrs = {in(x), in(x + C), in(x + 2 * C), in(out), in(dout),         in(lse),
                             dqkv,  dqkv + C,  dqkv + 2 * C,  scratch, in(&kScaleValue), in(&kOneValue)};
  if (causal) uids.push_back(kNegInf), ptrs.push_back(in(neg_inf_value()));
  unsigned char* ws = impl_->workspace.get();
  if (p.accum) {
    unsigned char* acc = ws + aligned(p.workspace);
    if (version() < 90600) CUDA_CHECK(cudaMemsetAsync(acc, 0, size_t(p.accum), s));  // later ones zero it themselves
    uids.push_back(kDQAccum), ptrs.push_back(acc);
  }
  execute(impl_->handle, p, uids, ptrs, ws, s);
}
