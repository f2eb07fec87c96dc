// workloads.hpp: cq, pc, sps, TATP, TPCC and YCSB-A written against engram/arp.hpp, with
// the same pool layout, protocol, recovery and invariants as engram-model's
// Rust workloads (crates/engram-model/src/arp/workloads), so a trace of any
// of them is checked by `engram-arp check <trace> <name>`:
//   thread t's log area a at t*1024 + a*512: count word, (addr, old) pairs;
//   data from offset 16384 (sps: 256 words 1..256; TATP: 128 subscribers of
//   (location, checksum); YCSB-A: 128 records of (version, 4 fields) every 64 B;
//   cq: a 64-slot ring, head at +512, tail at +576; pc: 32 buckets of 128 B,
//   4 slots of (key, version, value) each; TPCC: 4 districts' next-order
//   counters every 64 B, 64 stock words, then kTpccOrders orders of 128 B per
//   district: marker, line count, stock delta, (item+1, quantity) lines from +32).
// TPCC's order table holds tpcc_orders() = workers * ops + 1 orders per
// district (size_for(workers, ops) sets it before pool_size; the Rust
// generator's layout, so `engram-arp check <trace> TPCC --ops N` agrees):
// room for every order the run can make, so no new order is ever skipped,
// however long the run (see docs/bench/arp.md on why a table sized to the
// run is faithful to a growing one).
// Every update is an undo-logged transaction under its locks: log each old
// value as its lock is taken; sequence point; count word = seq << 8 |
// entries (seq numbers the thread's transactions from 1); sequence point;
// new values; sequence point; count word = seq << 8 (commit); release.
// Locks guarding only volatile data (statistics, the DRAM index) carry
// engram::volatile_sync. Crash behaviour: recovery rolls back any log area
// whose count word's low byte is non-zero.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "engram/arp.hpp"

namespace engram::workloads {

enum class Bench { cq, pc, sps, tatp, tpcc, ycsb_a };
constexpr Bench kAll[] = {Bench::cq, Bench::pc, Bench::sps, Bench::tatp, Bench::tpcc, Bench::ycsb_a};
constexpr std::uint64_t kData = 16384, kLogArea = 512, kMaxEntries = 31;
constexpr std::uint64_t kSpsN = 256, kTatpSubs = 128, kYcsbRecords = 128;
constexpr std::uint64_t kCqCap = 64, kPcBuckets = 32, kTpccDistricts = 4, kTpccItems = 64;

constexpr std::uint64_t cq_head() { return kData + 8 * kCqCap; }
constexpr std::uint64_t cq_tail() { return cq_head() + 64; }
constexpr std::uint64_t tpcc_district(std::uint64_t d) { return kData + 64 * d; }
constexpr std::uint64_t tpcc_stock(std::uint64_t i) { return kData + 64 * kTpccDistricts + 8 * i; }
/// Orders per district in TPCC's table (default: the checked runs' 8 x 6 + 1).
inline std::uint64_t& tpcc_orders() {
  static std::uint64_t n = 8 * 6 + 1;
  return n;
}
/// Sizes the TPCC order table for `workers` threads of `ops` operations.
inline void size_for(unsigned workers, unsigned ops) { tpcc_orders() = std::uint64_t{workers} * ops + 1; }
inline std::uint64_t tpcc_order(std::uint64_t d, std::uint64_t o) { return tpcc_stock(kTpccItems) + 128 * (d * tpcc_orders() + o); }

inline const char* bench_name(Bench b) {
  switch (b) {
    case Bench::cq: return "cq";
    case Bench::pc: return "pc";
    case Bench::sps: return "sps";
    case Bench::tatp: return "TATP";
    case Bench::tpcc: return "TPCC";
    case Bench::ycsb_a: return "YCSB_A";
  }
  return "?";
}
inline Bench parse_bench(const std::string& s) {
  for (Bench b : kAll)
    if (s == bench_name(b)) return b;
  throw Error(ErrorCode::invalid_argument, "unknown workload: " + s + " (cq, pc, sps, TATP, TPCC, YCSB_A)");
}
inline std::size_t pool_size(Bench b) {
  switch (b) {
    case Bench::cq: return kData + 8 * kCqCap + 128;
    case Bench::pc: return kData + 128 * kPcBuckets;
    case Bench::sps: return kData + 8 * kSpsN;
    case Bench::tatp: return kData + 16 * kTatpSubs;
    case Bench::tpcc: return tpcc_order(kTpccDistricts, 0);
    case Bench::ycsb_a: return kData + 64 * kYcsbRecords;
  }
  return kData;
}

/// The Rust workloads' `mix` (checksums and field values).
inline std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9e3779b97f4a7c15ull ^ b * 0xc2b2ae3d27d4eb4full;
  x ^= x >> 29;
  return (x * 0x165667b19e3779f9ull) | 1;
}

/// Volatile locks (in DRAM).
struct Locks {
  persistent<std::uint64_t> guard[256];  // persistent-data locks (stripes, subscribers, records, buckets, districts)
  persistent<std::uint64_t> items[kTpccItems];  // TPCC's stock locks
  persistent<std::uint64_t> stats, index, antagonist, ticket, lru;
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
  if (b == Bench::tpcc)
    for (std::uint64_t i = 0; i < kTpccItems; ++i) set(tpcc_stock(i), 100);
}

class Worker {
 public:
  Worker(const Pool& pool, Locks& locks, std::uint32_t log_slot, std::uint64_t seed)
      : pool_(pool), locks_(locks), log_slot_(log_slot), rng_(seed | 1) {}

  /// Operation number `i` of this worker.
  void op(Bench b, unsigned i = 0) {
    switch (b) {
      case Bench::cq: cq(i); break;
      case Bench::pc: pc(); break;
      case Bench::sps: sps(); break;
      case Bench::tatp: tatp(); break;
      case Bench::tpcc: tpcc(); break;
      case Bench::ycsb_a: ycsb(); break;
    }
  }

 private:
  using Writes = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

  // Alternate enqueues (a volatile ticket lock hands out the value) and
  // dequeues of a persistent ring under one lock.
  void cq(unsigned i) {
    bool enqueue = ((rand(2) + i) & 1) == 0;
    if (enqueue) {
      lock(locks_.ticket, volatile_sync);
      unlock(locks_.ticket, volatile_sync);
    }
    auto& l = locks_.guard[255];
    lock(l, Annotation::none);
    std::uint64_t h = get(cq_head()), t = get(cq_tail());
    if (enqueue && t - h < kCqCap)
      tx({{kData + 8 * (t % kCqCap), mix(rand(~0ull), t)}, {cq_tail(), t + 1}});
    else if (!enqueue && h < t)
      tx({{kData + 8 * (h % kCqCap), 0}, {cq_head(), h + 1}});
    unlock(l, Annotation::none);
  }

  // Get or put a random key in its bucket (the bucket's lock); the LRU list
  // is volatile.
  void pc() {
    std::uint64_t key = 1 + rand(256), b = key % kPcBuckets, bucket = kData + 128 * b;
    lock(locks_.guard[b], Annotation::none);
    if (rand(2) == 1) {
      std::uint64_t s = 0;
      for (std::uint64_t k = 0; k < 4 && s == 0; ++k)
        if (get(bucket + 32 * k) == key) s = bucket + 32 * k;
      for (std::uint64_t k = 0; k < 4 && s == 0; ++k)
        if (get(bucket + 32 * k) == 0) s = bucket + 32 * k;
      if (s == 0) s = bucket + 32 * ((key / kPcBuckets) % 4);
      std::uint64_t ver = get(s) == key ? get(s + 8) + 1 : 1;
      tx({{s, key}, {s + 8, ver}, {s + 16, mix(key, ver)}});
    }
    unlock(locks_.guard[b], Annotation::none);
    lock(locks_.lru, volatile_sync);
    unlock(locks_.lru, volatile_sync);
  }

  // New order: the district's counter, the order and its lines, the stock of
  // 3-6 distinct items (each looked up in a volatile item index); locks held
  // to the end (two-phase), items in ascending order.
  void tpcc() {
    std::uint64_t d = rand(kTpccDistricts), n = 3 + rand(4);
    std::vector<std::uint64_t> items;
    while (items.size() < n) {
      std::uint64_t it = rand(kTpccItems);
      if (std::find(items.begin(), items.end(), it) == items.end()) items.push_back(it);
    }
    std::sort(items.begin(), items.end());
    entries_ = 0;
    lock(locks_.guard[d], Annotation::none);
    std::uint64_t o = get(tpcc_district(d));
    bool room = o + 1 < tpcc_orders();
    std::uint64_t rec = tpcc_order(d, std::min(o, tpcc_orders() - 1));
    Writes writes{{tpcc_district(d), o + 1}, {rec, o + 1}, {rec + 8, n}};
    if (room) {
      for (auto& w : writes) log(w.first);
      log(rec + 16);
    }
    std::uint64_t delta = 0;
    for (std::size_t k = 0; k < items.size(); ++k) {
      std::uint64_t it = items[k];
      lock(locks_.index, volatile_sync);
      unlock(locks_.index, volatile_sync);
      lock(locks_.items[it], Annotation::none);
      std::uint64_t q = 1 + rand(5), s = get(tpcc_stock(it));
      std::uint64_t now = s < q + 10 ? s - q + 91 : s - q;
      delta += s - now;
      Writes line{{tpcc_stock(it), now}, {rec + 32 + 16 * k, it + 1}, {rec + 40 + 16 * k, q}};
      if (room)
        for (auto& w : line) log(w.first);
      writes.insert(writes.end(), line.begin(), line.end());
    }
    writes.push_back({rec + 16, delta});
    if (room) commit(writes);
    for (auto it = items.rbegin(); it != items.rend(); ++it) unlock(locks_.items[*it], Annotation::none);
    unlock(locks_.guard[d], Annotation::none);
  }

  // A transaction whose locks are all held already: log everything, commit.
  void tx(const Writes& writes) {
    entries_ = 0;
    for (auto& w : writes) log(w.first);
    commit(writes);
  }

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
    if (entries_ >= kMaxEntries) return;
    std::uint64_t e = area() + 8 + 16 * entries_++;
    word(e).store(addr, std::memory_order_relaxed);
    word(e + 8).store(get(addr), std::memory_order_relaxed);
  }
  // 2. validate the log, 3. write in place, 4. commit; then flip areas
  void commit(const Writes& writes) {
    std::uint64_t log = area();
    area_ ^= 1;
    ++seq_;
    sequence_point();
    word(log).store(seq_ << 8 | entries_, std::memory_order_relaxed);
    sequence_point();
    for (auto& w : writes) word(w.first).store(w.second, std::memory_order_relaxed);
    sequence_point();
    word(log).store(seq_ << 8, std::memory_order_relaxed);
  }

  const Pool& pool_;
  Locks& locks_;
  std::uint32_t log_slot_;
  std::uint64_t rng_;
  std::uint64_t area_ = 0, entries_ = 0, seq_ = 0;
};

/// Runs `workers` threads (`ops` operations each; log slots 0..workers-1)
/// and 2 antagonists that only take the annotated antagonist lock `ops` times.
inline void run(const Pool& pool, Bench b, Locks& locks, unsigned workers, unsigned ops, std::uint64_t seed) {
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < workers; ++t)
    ts.emplace_back([&, t] {
      Worker w(pool, locks, t, seed * 7919 + t + 1);
      for (unsigned i = 0; i < ops; ++i) w.op(b, i);
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
