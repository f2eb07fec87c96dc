// arp_bench: real x86 timings of each model's mapping (CLWB + SFENCE) on a
// pool file (tmpfs by default), with sps (8 swapping threads + 2 volatile
// antagonists), and the trace writer.
//
//   arp_bench time [--dir /dev/shm] [--ops N] [--reps R]   CSV on stdout:
//       model,seconds,swaps,swaps_per_sec,sfence_per_swap,clwb_per_swap
//   arp_bench trace <file> [--ops N]    sps in trace mode (ARP mapping), for engram-arp check
//
// Exit status 0, or 1 with a message on bad usage or an engram::Error.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "sps.hpp"

using namespace engram;

namespace {
std::string arg(int argc, char** argv, const char* name, const char* dflt) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return dflt;
}

double run_once(Model m, const std::string& dir, unsigned ops, MappingStats& total) {
  std::string path = dir + "/engram-arp-bench.pool";
  Pool pool = Pool::create(path, workloads::kPoolSize);
  Runtime::init(m, &pool);
  workloads::sps_init(pool);
  workloads::SpsLocks locks;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  std::mutex mu;
  for (unsigned t = 0; t < 8; ++t)
    ts.emplace_back([&, t] {
      Runtime::stats() = MappingStats{};
      workloads::SpsWorker w(pool, locks, t, t + 1);
      for (unsigned i = 0; i < ops; ++i) w.swap_once();
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
    std::printf("model,seconds,swaps,swaps_per_sec,sfence_per_swap,clwb_per_swap\n");
    for (Model m : {Model::scp, Model::epoch, Model::rcbsp, Model::arp, Model::arp_va}) {
      double best = 1e30;
      MappingStats st;
      for (unsigned r = 0; r < reps; ++r) {
        st = MappingStats{};
        best = std::min(best, run_once(m, dir, ops, st));
      }
      double swaps = 8.0 * ops;
      std::printf("%s,%.4f,%.0f,%.0f,%.2f,%.2f\n", model_name(m), best, swaps, swaps / best, st.sfence / swaps, st.clwb / swaps);
    }
    return 0;
  }
  if (cmd == "trace" && argc > 2) {
    std::string path = std::string(argv[2]) + ".pool";
    Pool pool = Pool::create(path, workloads::kPoolSize);
    workloads::sps_init(pool);
    Tracer tracer(pool);
    Runtime::init(Model::arp, &pool, &tracer);
    workloads::SpsLocks locks;
    workloads::sps_run(pool, locks, 8, static_cast<unsigned>(std::stoul(arg(argc, argv, "--ops", "10"))), 1);
    Runtime::init(Model::arp, nullptr);
    tracer.write(argv[2]);
    ::unlink(path.c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: arp_bench time [--dir D] [--ops N] [--reps R] | trace <file> [--ops N]\n");
  return 1;
} catch (const engram::Error& e) {
  std::fprintf(stderr, "arp_bench: %s (code %d)\n", e.what(), static_cast<int>(e.code()));
  return 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "arp_bench: %s\n", e.what());
  return 1;
}
