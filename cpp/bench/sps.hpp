// sps.hpp: the sps workload (random swaps in a persistent array) written
// against engram/arp.hpp, with the same pool layout as engram-model's Rust
// workload (crates/engram-model/src/arp/workloads), so a trace of it is
// checked by `engram-arp check <trace> sps` with the same recovery and
// invariant:
//   thread t's log area a at t*1024 + a*512: count word, (addr, old) pairs;
//   the array: 256 words at 16384, initially 1..256.
// Each swap is an undo-logged transaction under the stripe locks of its two
// elements (16 elements a stripe), logging as each lock is taken, then a
// volatile-annotated statistics lock. Crash behaviour: recovery rolls back
// any log area with a non-zero count; the array stays a permutation.
#pragma once

#include <cstdint>
#include <thread>
#include <vector>

#include "engram/arp.hpp"

namespace engram::workloads {

constexpr std::uint64_t kData = 16384, kN = 256, kLogArea = 512;
constexpr std::size_t kPoolSize = kData + 8 * kN;

/// Volatile locks (in DRAM): per stripe, plus the annotated statistics lock.
struct SpsLocks {
  persistent<std::uint64_t> stripe[16];
  persistent<std::uint64_t> stats;
  persistent<std::uint64_t> antagonist;
  std::uint64_t swaps = 0;  // guarded by `stats`
};

inline void lock(persistent<std::uint64_t>& l, Annotation a) {
  for (;;) {
    while (l.load(std::memory_order_relaxed) != 0) std::this_thread::yield();
    std::uint64_t free = 0;
    if (l.compare_exchange_strong(free, 1, std::memory_order_acquire, a)) return;
  }
}

inline void unlock(persistent<std::uint64_t>& l, Annotation a) { l.store(0, std::memory_order_release, a); }

/// Fills the array with 1..256 (before any thread runs, before tracing).
inline void sps_init(const Pool& pool) {
  for (std::uint64_t i = 0; i < kN; ++i) pool.at<persistent<std::uint64_t>>(kData + 8 * i)->store(i + 1, std::memory_order_relaxed);
}

class SpsWorker {
 public:
  SpsWorker(const Pool& pool, SpsLocks& locks, std::uint32_t log_slot, std::uint64_t seed)
      : pool_(pool), locks_(locks), log_slot_(log_slot), rng_(seed | 1) {}

  void swap_once() {
    std::uint64_t i = rand(kN), j = (i + 1 + rand(kN - 1)) % kN;
    std::uint64_t lo = kData + 8 * std::min(i, j), hi = kData + 8 * std::max(i, j);
    std::uint64_t s1 = std::min(i, j) / 16, s2 = std::max(i, j) / 16;
    entries_ = 0;
    lock(locks_.stripe[s1], Annotation::none);
    log(lo);
    if (s2 != s1) lock(locks_.stripe[s2], Annotation::none);
    log(hi);
    std::uint64_t vi = word(kData + 8 * i).load(std::memory_order_relaxed);
    std::uint64_t vj = word(kData + 8 * j).load(std::memory_order_relaxed);
    commit({{kData + 8 * i, vj}, {kData + 8 * j, vi}});
    if (s2 != s1) unlock(locks_.stripe[s2], Annotation::none);
    unlock(locks_.stripe[s1], Annotation::none);
    lock(locks_.stats, volatile_sync);
    ++locks_.swaps;
    unlock(locks_.stats, volatile_sync);
  }

 private:
  persistent<std::uint64_t>& word(std::uint64_t off) { return *pool_.at<persistent<std::uint64_t>>(off); }
  std::uint64_t area() const { return log_slot_ * 2 * kLogArea + area_ * kLogArea; }
  std::uint64_t rand(std::uint64_t n) {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_ % n;
  }
  // 1. log the old value as soon as its lock is held
  void log(std::uint64_t addr) {
    std::uint64_t e = area() + 8 + 16 * entries_++;
    word(e).store(addr, std::memory_order_relaxed);
    word(e + 8).store(word(addr).load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
  // 2. validate the log, 3. write in place, 4. commit; then flip areas
  void commit(std::initializer_list<std::pair<std::uint64_t, std::uint64_t>> writes) {
    std::uint64_t log = area();
    area_ ^= 1;
    sequence_point();
    word(log).store(entries_, std::memory_order_relaxed);
    sequence_point();
    for (auto& w : writes) word(w.first).store(w.second, std::memory_order_relaxed);
    sequence_point();
    word(log).store(0, std::memory_order_relaxed);
  }

  const Pool& pool_;
  SpsLocks& locks_;
  std::uint32_t log_slot_;
  std::uint64_t rng_;
  std::uint64_t area_ = 0, entries_ = 0;
};

/// Runs `workers` swapping threads (`ops` swaps each) and 2 antagonists that
/// only take the annotated antagonist lock `ops` times. Log slots: 0..workers-1.
inline void sps_run(const Pool& pool, SpsLocks& locks, unsigned workers, unsigned ops, std::uint64_t seed) {
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < workers; ++t)
    ts.emplace_back([&, t] {
      SpsWorker w(pool, locks, t, seed * 7919 + t + 1);
      for (unsigned i = 0; i < ops; ++i) w.swap_once();
    });
  for (int a = 0; a < 2; ++a)
    ts.emplace_back([&] {
      for (unsigned i = 0; i < ops; ++i) {
        lock(locks.antagonist, volatile_sync);
        unlock(locks.antagonist, volatile_sync);
      }
    });
  for (auto& t : ts) t.join();
}

}  // namespace engram::workloads
