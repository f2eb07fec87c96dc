// workloads.hpp: sps, TATP and YCSB-A written against engram/arp.hpp, with
// the same pool layout, protocol, recovery and invariants as engram-model's
// Rust workloads (crates/engram-model/src/arp/workloads), so a trace of any
// of them is checked by `engram-arp check <trace> <name>`:
//   thread t's log area a at t*1024 + a*512: count word, (addr, old) pairs;
//   data from offset 16384 (sps: 256 words 1..256; TATP: 128 subscribers of
//   (location, checksum); YCSB-A: 128 records of (version, 4 fields) every 64 B).
// Every update is an undo-logged transaction under its locks: log each old
// value as its lock is taken; sequence point; count; sequence point; new
// values; sequence point; count = 0; release. Locks guarding only volatile
// data (statistics, the DRAM index) carry engram::volatile_sync. Crash
// behaviour: recovery rolls back any log area with a non-zero count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "engram/arp.hpp"

namespace engram::workloads {

enum class Bench { sps, tatp, ycsb_a };
constexpr std::uint64_t kData = 16384, kLogArea = 512;
constexpr std::uint64_t kSpsN = 256, kTatpSubs = 128, kYcsbRecords = 128;

inline const char* bench_name(Bench b) { return b == Bench::sps ? "sps" : b == Bench::tatp ? "TATP" : "YCSB_A"; }
inline Bench parse_bench(const std::string& s) {
  for (Bench b : {Bench::sps, Bench::tatp, Bench::ycsb_a})
    if (s == bench_name(b)) return b;
  throw Error(ErrorCode::invalid_argument, "unknown workload: " + s + " (sps, TATP, YCSB_A)");
}
inline std::size_t pool_size(Bench b) {
  return kData + (b == Bench::sps ? 8 * kSpsN : b == Bench::tatp ? 16 * kTatpSubs : 64 * kYcsbRecords);
}

/// The Rust workloads' `mix` (checksums and field values).
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full;
  x ^= x >> 29;
  return (x * 0x165667b19e3779f9ull) | 1;
}

/// Volatile locks (in DRAM).
struct Locks {
  persistent<std::uint64_t> guard[256];  // persistent-data locks (stripes, subscribers, records)
  persistent<std::uint64_t> stats, index, antagonist;
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

/// Initial content (before any thread runs, before tracing).
inline void init(const Pool& pool, Bench b) {
  auto set = [&](std::uint64_t off, std::uint64_t v) { pool.at<persistent<std::uint64_t>>(off)->store(v, std::memory_order_relaxed); };
  if (b == Bench::sps)
    for (std::uint64_t i = 0; i < kSpsN; ++i) set(kData + 8 * i, i + 1);
  if (b == Bench::tatp)
    for (std::uint64_t s = 0; s < kTatpSubs; ++s) set(kData + 16 * s + 8, mix(s, 0));
  if (b == Bench::ycsb_a)
    for (std::uint64_t r = 0; r < kYcsbRecords; ++r)
      for (std::uint64_t f = 0; f < 4; ++f) set(kData + 64 * r + 8 + 8 * f, mix(r, f));
}

class Worker {
 public:
  Worker(const Pool& pool, Locks& locks, std::uint32_t log_slot, std::uint64_t seed)
      : pool_(pool), locks_(locks), log_slot_(log_slot), rng_(seed | 1) {}

  void op(Bench b) {
    if (b == Bench::sps) sps();
    if (b == Bench::tatp) tatp();
    if (b == Bench::ycsb_a) ycsb();
  }

 private:
  // Swap two elements under their stripes' locks, then count it (volatile).
  void sps() {
    std::uint64_t i = rand(kSpsN), j = (i + 1 + rand(kSpsN - 1)) % kSpsN;
    std::uint64_t s1 = std::min(i, j) / 16, s2 = std::max(i, j) / 16;
    entries_ = 0;
    lock(locks_.guard[s1], Annotation::none);
    log(kData + 8 * std::min(i, j));
    if (s2 != s1) lock(locks_.guard[s2], Annotation::none);
    log(kData + 8 * std::max(i, j));
    std::uint64_t vi = get(kData + 8 * i), vj = get(kData + 8 * j);
    commit({{kData + 8 * i, vj}, {kData + 8 * j, vi}});
    if (s2 != s1) unlock(locks_.guard[s2], Annotation::none);
    unlock(locks_.guard[s1], Annotation::none);
    lock(locks_.stats, volatile_sync);
    ++locks_.swaps;
    unlock(locks_.stats, volatile_sync);
  }

  // Update one subscriber's location, found through a volatile index.
  void tatp() {
    std::uint64_t s = rand(kTatpSubs), rec = kData + 16 * s;
    lock(locks_.index, volatile_sync);
    unlock(locks_.index, volatile_sync);
    lock(locks_.guard[s], Annotation::none);
    std::uint64_t loc = 1 + rand(1ull << 30);
    entries_ = 0;
    log(rec);
    log(rec + 8);
    commit({{rec, loc}, {rec + 8, mix(s, loc)}});
    unlock(locks_.guard[s], Annotation::none);
  }

  // Read or rewrite a whole record, found through a volatile index.
  void ycsb() {
    std::uint64_t r = rand(kYcsbRecords), rec = kData + 64 * r;
    lock(locks_.index, volatile_sync);
    unlock(locks_.index, volatile_sync);
    lock(locks_.guard[r], Annotation::none);
    if (rand(2) == 1) {
      std::uint64_t v = get(rec) + 1;
      entries_ = 0;
      for (std::uint64_t f = 0; f < 5; ++f) log(rec + 8 * f);
      commit({{rec, v}, {rec + 8, mix(r, v * 8)}, {rec + 16, mix(r, v * 8 + 1)}, {rec + 24, mix(r, v * 8 + 2)}, {rec + 32, mix(r, v * 8 + 3)}});
    } else {
      for (std::uint64_t f = 0; f < 5; ++f) (void)get(rec + 8 * f);
    }
    unlock(locks_.guard[r], Annotation::none);
  }

  persistent<std::uint64_t>& word(std::uint64_t off) { return *pool_.at<persistent<std::uint64_t>>(off); }
  std::uint64_t get(std::uint64_t off) { return word(off).load(std::memory_order_relaxed); }
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
    word(e + 8).store(get(addr), std::memory_order_relaxed);
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
  Locks& locks_;
  std::uint32_t log_slot_;
  std::uint64_t rng_;
  std::uint64_t area_ = 0, entries_ = 0;
};

/// Runs `workers` threads (`ops` operations each; log slots 0..workers-1)
/// and 2 antagonists that only take the annotated antagonist lock `ops` times.
inline void run(const Pool& pool, Bench b, Locks& locks, unsigned workers, unsigned ops, std::uint64_t seed) {
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < workers; ++t)
    ts.emplace_back([&, t] {
      Worker w(pool, locks, t, seed * 7919 + t + 1);
      for (unsigned i = 0; i < ops; ++i) w.op(b);
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
