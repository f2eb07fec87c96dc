// arp_bench: real x86 timings of each model's mapping (CLWB + SFENCE) on a
// pool file (tmpfs by default), with cq, pc, sps, TATP, TPCC and YCSB-A (8 threads + 2
// volatile antagonists each), and the trace writer.
//
//   arp_bench time [--dir /dev/shm] [--ops N] [--reps R]   CSV on stdout:
//       workload,model,seconds,ops,ops_per_sec,sfence_per_op,clwb_per_op
//   arp_bench trace <file> <workload> [--ops N]   in trace mode (ARP mapping), for engram-arp check
//
// Exit status 0, or 1 with a message on bad usage or an engram::Error.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "workloads.hpp"

using namespace engram;

namespace {
std::string arg(int argc, char** argv, const char* name, const char* dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return dflt;
}

double run_once(workloads::Bench b, Model m, const std::string& dir, unsigned ops, MappingStats& total) {
  std::string path = dir + "/engram-arp-bench.pool";
  workloads::size_for(8, ops);
  Pool pool = Pool::create(path, workloads::pool_size(b));
  Runtime::init(m, &pool);
  workloads::init(pool, b);
  workloads::Locks locks;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  std::mutex mu;
  for (unsigned t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      Runtime::stats() = MappingStats{};
      workloads::Worker w(pool, locks, t, t + 1);
      for (unsigned i = 0; i < ops; ++i) w.op(b, i);
      std::lock_guard<std::mutex> g(mu);
      total.sfence += Runtime::stats().sfence;
      total.clwb += Runtime::stats().clwb;
    });
  for (int a = 0; a < 2; ++a)
    ts.emplace_back([&] {
      for (unsigned i = 0; i < ops; ++i) {
        workloads::lock(locks.antagonist, volatile_sync);
        workloads::unlock(locks.antagonist, volatile_sync);
      }
    });
  for (auto& t : ts) t.join();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Runtime::init(Model::arp, nullptr);
  ::unlink(path.c_str());
  return s;
}
}  // namespace

int main(int argc, char** argv) try {
  std::string cmd = argc > 1 ? argv[1] : "";
  unsigned ops = static_cast<unsigned>(std::stoul(arg(argc, argv, "--ops", "20000")));
  if (cmd == "time") {
    std::string dir = arg(argc, argv, "--dir", "/dev/shm");
    unsigned reps = static_cast<unsigned>(std::stoul(arg(argc, argv, "--reps", "3")));
    std::printf("workload,model,seconds,ops,ops_per_sec,sfence_per_op,clwb_per_op\n");
    for (auto b : workloads::kAll) {
      for (Model m : {Model::scp, Model::epoch, Model::rcbsp, Model::arp, Model::arp_va}) {
        double best = 1e30;
        MappingStats st;
        for (unsigned r = 0; r < reps; ++r) {
          st = MappingStats{};
          best = std::min(best, run_once(b, m, dir, ops, st));
        }
        double n = 8.0 * ops;
        std::printf("%s,%s,%.4f,%.0f,%.0f,%.2f,%.2f\n", workloads::bench_name(b), model_name(m), best, n, n / best,
                    st.sfence / n, st.clwb / n);
      }
    }
    return 0;
  }
  if (cmd == "trace" && argc > 3) {
    auto b = workloads::parse_bench(argv[3]);
    std::string path = std::string(argv[2]) + ".pool";
    unsigned trace_ops = static_cast<unsigned>(std::stoul(arg(argc, argv, "--ops", "10")));
    workloads::size_for(8, trace_ops);
    Pool pool = Pool::create(path, workloads::pool_size(b));
    workloads::init(pool, b);
    Tracer tracer(pool);
    Runtime::init(Model::arp, &pool, &tracer);
    workloads::Locks locks;
    workloads::run(pool, b, locks, 8, trace_ops, 1);
    Runtime::init(Model::arp, nullptr);
    tracer.write(argv[2]);
    ::unlink(path.c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: arp_bench time [--dir D] [--ops N] [--reps R] | trace <file> cq|pc|sps|TATP|TPCC|YCSB_A [--ops N]\n");
  return 1;
} catch (const engram::Error& e) {
  std::fprintf(stderr, "arp_bench: %s (code %d)\n", e.what(), static_cast<int>(e.code()));
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "arp_bench: %s\n", e.what());
  return 1;
}
