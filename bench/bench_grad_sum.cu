// Data parallel: how fast the gradients are summed on idle GPUs, by the copy engines (train/peer_sum.h)
// and by NCCL, at the sizes the trainers sum; rank 0 prints one JSON line per engine, mode and size.
//
//   mpirun -np 4 ./bench_grad_sum --nccl-id-file ID     (or RANK, WORLD_SIZE, LOCAL_RANK per process)
//
// Modes: all_reduce (every rank gets the sum: the all-reduce mode) and reduce (rank 0 gets it: what the
// sharded mode does for a tensor's owner). A timed rep is `--sums` sums back to back, then a one-float NCCL
// sum, as a training step ends with the loss's (PeerSum's barriers are reused after it); ms is the median
// rep's time divided by the sums in it. busbw follows nccl-tests: all-reduce 2 (N - 1) / N bytes / time,
// reduce (N - 1) / N bytes / time, comparable with the links' speed.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/device_buffer.h"
#include "common/error.h"
#include "common/event_timer.h"
#include "train/nccl_comm.h"
#include "train/peer_sum.h"
#include "train/process_group.h"

namespace {
struct Size {
  const char* name;
  int64_t n;  // fp32 elements
};
// One transformer block of GPT-2 124M (12 C^2 + 13 C, C = 768) and 355M (C = 1024), 124M's tied token
// table (50,304 x 768: its head part is summed alone during backward).
const Size kSizes[] = {{"gpt2-124m block", 7087872}, {"gpt2-355m block", 12596224}, {"gpt2-124m table", 38633472}};

struct Args {
  std::string id_file;
  int sums = 8, reps = 11;
};

void print_line(const NcclComm& comm, const char* engine, const char* mode, const Size& z, float ms) {
  if (comm.rank() != 0) return;
  const double n = comm.world(), bytes = double(z.n) * 4;
  const double factor = std::string(mode) == "all_reduce" ? 2 * (n - 1) / n : (n - 1) / n;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp p;
  CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  std::printf(
      "{\"bench\":\"grad_sum\",\"gpu\":\"%s\",\"world\":%d,\"engine\":\"%s\",\"mode\":\"%s\",\"tensor\":\"%s\","
      "\"elems\":%lld,\"ms\":%.4f,\"busbw_gbps\":%.1f}\n",
      p.name, comm.world(), engine, mode, z.name, static_cast<long long>(z.n), ms, factor * bytes / (ms * 1e6));
  std::fflush(stdout);
}

// The median time of one sum: reps of a.sums sums, each rep closed by the loss-like NCCL sum. A rep is a
// step for PeerSum: its barrier slots start again only after that NCCL sum (train/peer_sum.h).
template <class F>
float time_sums(const Args& a, NcclComm& comm, PeerSum& peer, float* one, cudaStream_t s, F&& sum_once) {
  auto rep = [&] {
    peer.begin_step();
    for (int i = 0; i < a.sums; i++) sum_once();
    comm.sum(one, 1, s);
  };
  return median_event_ms(rep, s, a.reps, 2) / float(a.sums);
}

void check_args(const Args& a, const ProcessGroup& g) {
  if (a.sums < 1) user_error("--sums must be >= 1 (got ", a.sums, ").");
  if (a.reps < 1) user_error("--reps must be >= 1 (got ", a.reps, ").");
  struct stat st;
  if (a.id_file.empty()) user_error("give --nccl-id-file, a fresh path on a folder that every process sees.");
  if (stat(a.id_file.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    user_error("--nccl-id-file '", a.id_file, "' is a folder; give a new file's path in it.");
  if (g.world < 2) user_error("it sums over processes: launch 2 or more, e.g. with mpirun -np 4.");
}

void run(const Args& a) {
  const ProcessGroup g = process_group_from_env();
  check_args(a, g);
  select_gpu(g.local_rank);
  NcclComm comm(g, a.id_file);
  int64_t most = 0;
  for (const Size& z : kSizes) most = std::max(most, z.n);
  DeviceBuffer<float> grads(size_t(most), "gradients"), one(1, "one float");
  grads.upload(std::vector<float>(size_t(most), 1.0f + float(comm.rank())));  // the values do not matter
  one.upload(std::vector<float>(1, 1.0f));
  PeerSum peer(comm.rank(), comm.world(), nccl_exchange(comm), grads.get());
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const Size& z : kSizes)
    for (const int root : {-1, 0}) {
      const char* mode = root < 0 ? "all_reduce" : "reduce";
      const float copy_ms = time_sums(a, comm, peer, one.get(), s, [&] { peer.sum({{0, z.n, root}}, s); });
      print_line(comm, "copy", mode, z, copy_ms);
      const float nccl_ms = time_sums(a, comm, peer, one.get(), s, [&] {
        if (root < 0)
          comm.sum(grads.get(), size_t(z.n), s);
        else
          comm.reduce_sum(grads.get(), size_t(z.n), root, s);
      });
      print_line(comm, "nccl", mode, z, nccl_ms);
    }
  CUDA_CHECK(cudaStreamSynchronize(s));
  CUDA_CHECK(cudaStreamDestroy(s));
}
}  // namespace

int main(int argc, char** argv) {
  Args a;
  Cli cli("bench_grad_sum", "Gradient sums over the processes, copy engines against NCCL; one JSON line each.");
  cli.add(0, "nccl-id-file", &a.id_file, "where rank 0 puts NCCL's id for the others (a fresh path)");
  cli.add(0, "sums", &a.sums, "sums in one timed rep");
  cli.add(0, "reps", &a.reps, "timed reps; the median is reported");
  try {
    if (!cli.parse(argc, argv)) return 0;
    run(a);
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_grad_sum: %s\n", e.what());
    return 1;
  }
  return 0;
}
