// GoogleTest suite of the C++ ARP library: the pool (over the engine's C
// ABI), persistent<T>
// semantics, the x86 mapping of each model (which fences it issues), and
// trace mode (the text format engram-model reads; checked by the Rust
// checker in `make test-cpp`).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "engram/arp.hpp"
#include "workloads.hpp"

using namespace engram;

namespace {
std::string tmp_path(const char* name) { return std::string(::testing::TempDir()) + name + std::to_string(::getpid()); }

struct Reset {
  ~Reset() { Runtime::init(Model::arp, nullptr, nullptr); }
};
}  // namespace

TEST(Pool, CreateOpenOffsets) {
  auto path = tmp_path("pool");
  {
    Pool p = Pool::create(path, 4096);
    EXPECT_EQ(p.size(), 4096u);
    auto* w = p.at<std::uint64_t>(64);
    *w = 42;
    EXPECT_TRUE(p.contains(w));
    EXPECT_EQ(p.offset_of(w), 64u);
    int local = 0;
    EXPECT_FALSE(p.contains(&local));
  }
  Pool q = Pool::open(path);
  EXPECT_EQ(q.size(), 4096u);
  EXPECT_EQ(*q.at<std::uint64_t>(64), 42u);
  // the data region is a 64-byte-aligned part of the engine's mapping
  auto b = reinterpret_cast<std::uintptr_t>(q.base()), pb = reinterpret_cast<std::uintptr_t>(q.pool_base());
  EXPECT_EQ(b % 64, 0u);
  EXPECT_GT(b, pb);
  EXPECT_LE(b + q.size(), pb + q.pool_size());
  EXPECT_NE(q.handle(), 0u);
  q.close();
  EXPECT_EQ(q.handle(), 0u);
  EXPECT_EQ(q.base(), nullptr);
  ::unlink(path.c_str());
}

TEST(Pool, MovesOwnTheHandle) {
  auto path = tmp_path("pool-move");
  Pool p = Pool::create(path, 256);
  auto h = p.handle();
  Pool q = std::move(p);
  EXPECT_EQ(p.handle(), 0u);  // NOLINT: checking the moved-from state
  EXPECT_EQ(q.handle(), h);
  Pool r = Pool::create(path + "b", 256);
  r = std::move(q);  // closes r's own pool first
  EXPECT_EQ(r.handle(), h);
  ::unlink(path.c_str());
  ::unlink((path + "b").c_str());
}

TEST(Pool, EngineErrorsCarryTheAbiCodes) {
  auto path = tmp_path("notapool");
  { std::ofstream(path) << std::string(8192, 'x'); }
  try {
    Pool::open(path);
    FAIL() << "opened a non-pool";
  } catch (const Error& e) {
    EXPECT_NE(e.status(), 0);
    EXPECT_NE(std::string(e.what()).find("ENGRAM_ERR_"), std::string::npos) << e.what();
  }
  ::unlink(path.c_str());
}

TEST(Pool, BadInputIsATypedError) {
  try {
    Pool::open("/nonexistent/dir/pool");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::io);
  }
  auto path = tmp_path("pool2");
  Pool p = Pool::create(path, 128);
  EXPECT_THROW(p.at<std::uint64_t>(128), Error);
  EXPECT_THROW(p.at<std::uint64_t>(3), Error);
  int local = 0;
  EXPECT_THROW(p.offset_of(&local), Error);
  try {
    Pool::create(path, 0);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
  }
  EXPECT_THROW(parse_model("tso"), Error);
  EXPECT_EQ(parse_model("arp_va"), Model::arp_va);
  ::unlink(path.c_str());
}

TEST(Persistent, AtomicOperations) {
  persistent<std::uint64_t> v{5};
  EXPECT_FALSE(v.is_persistent());
  v.store(7, std::memory_order_release);
  EXPECT_EQ(v.load(std::memory_order_acquire), 7u);
  EXPECT_EQ(v.exchange(9), 7u);
  std::uint64_t expected = 1;
  EXPECT_FALSE(v.compare_exchange_strong(expected, 3));
  EXPECT_EQ(expected, 9u);
  EXPECT_TRUE(v.compare_exchange_strong(expected, 3, std::memory_order_acq_rel, volatile_sync));
  EXPECT_EQ(v.fetch_add(2), 3u);
  EXPECT_EQ(v.load(), 5u);
}

/// Per model: persist x, release a lock, acquire it, persist y, sequence
/// point. Returns the SFENCEs issued.
static std::uint64_t fences_for(Model m, Annotation a) {
  auto path = tmp_path("map");
  Pool p = Pool::create(path, 4096);
  Reset reset;
  Runtime::init(m, &p);
  Runtime::stats() = MappingStats{};
  auto& x = *p.at<persistent<std::uint64_t>>(0);
  auto& y = *p.at<persistent<std::uint64_t>>(64);
  persistent<std::uint64_t> lock{0};
  EXPECT_TRUE(x.is_persistent());
  x.store(1, std::memory_order_relaxed);
  lock.store(1, std::memory_order_release, a);
  lock.load(std::memory_order_acquire, a);
  y.store(1, std::memory_order_relaxed);
  sequence_point();
  EXPECT_EQ(Runtime::stats().persists, 2u);
  EXPECT_EQ(Runtime::stats().clwb, 2u);
  ::unlink(path.c_str());
  return Runtime::stats().sfence;
}

TEST(Mapping, WhereEachModelFences) {
  // sequence point: 1 SFENCE in every model
  EXPECT_EQ(fences_for(Model::scp, Annotation::none), 2u + 1);    // one per persist
  EXPECT_EQ(fences_for(Model::epoch, Annotation::none), 1u + 1);  // release (another thread's sequence point orders through it)
  EXPECT_EQ(fences_for(Model::rcbsp, Annotation::none), 2u + 1);  // release and acquire
  EXPECT_EQ(fences_for(Model::arp, Annotation::none), 1u + 1);    // release only: TSO orders the acquire
  EXPECT_EQ(fences_for(Model::arp_va, Annotation::none), 1u + 1);
  EXPECT_EQ(fences_for(Model::arp_va, volatile_sync), 1u);        // annotated release: free
  EXPECT_EQ(fences_for(Model::arp, volatile_sync), 1u + 1);       // ARP ignores annotations
}

// A release store to a flag in the pool is itself a persist ordered before
// what the acquirer persists next: its CLWB gets its own SFENCE (the
// counterexample in crates/engram-model/tests/arp_x86_mt.rs).
TEST(Mapping, APersistentReleaseFencesItsOwnWriteBack) {
  auto path = tmp_path("flag");
  Pool p = Pool::create(path, 4096);
  Reset reset;
  for (Model m : {Model::epoch, Model::rcbsp, Model::arp, Model::arp_va}) {
    Runtime::init(m, &p);
    Runtime::stats() = MappingStats{};
    auto& flag = *p.at<persistent<std::uint64_t>>(64);
    flag.store(1, std::memory_order_release);
    EXPECT_EQ(Runtime::stats().clwb, 1u) << model_name(m);
    EXPECT_EQ(Runtime::stats().sfence, 2u) << model_name(m);  // before (earlier persists) and after (itself)
  }
  Runtime::init(Model::arp_va, &p);
  Runtime::stats() = MappingStats{};
  p.at<persistent<std::uint64_t>>(64)->store(2, std::memory_order_release, volatile_sync);
  EXPECT_EQ(Runtime::stats().sfence, 0u);  // annotated: orders nothing
  ::unlink(path.c_str());
}

TEST(Trace, WritesTheTextFormatWithReadsFrom) {
  auto path = tmp_path("trace");
  Pool p = Pool::create(path, 256);
  p.at<std::uint64_t>(128)[0] = 0x0102;
  Reset reset;
  Tracer t(p);
  Runtime::init(Model::arp, &p, &t);
  auto& x = *p.at<persistent<std::uint64_t>>(0);
  persistent<std::uint64_t> flag{0};
  x.store(1, std::memory_order_relaxed);
  flag.store(1, std::memory_order_release);
  std::thread([&] {
    EXPECT_EQ(flag.load(std::memory_order_acquire), 1u);
    sequence_point();
  }).join();
  std::string s = t.text();
  std::istringstream in(s);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  ASSERT_GE(lines.size(), 6u) << s;
  EXPECT_EQ(lines[0], "arp-trace 1 base=256");
  EXPECT_EQ(lines[1].rfind("init 0x80 0201", 0), 0u) << s;
  EXPECT_EQ(lines[2], "0 st p rlx 0x0 0100000000000000");
  EXPECT_EQ(lines[3], "0 clwb 0x0");
  EXPECT_EQ(lines[4], "0 sfence");  // ARP: before the release
  EXPECT_NE(lines[5].find("0 st v rel "), std::string::npos) << lines[5];
  EXPECT_NE(lines[6].find("1 ld v acq "), std::string::npos) << lines[6];
  EXPECT_NE(lines[6].find(" 8 rf=3"), std::string::npos) << lines[6];
  EXPECT_EQ(lines[7], "1 sp");
  ::unlink(path.c_str());
}

/// Runs a workload in trace mode; the trace goes to $ENGRAM_ARP_TRACE_DIR for
/// the Rust checker (make test-cpp).
static void traced(workloads::Bench b, const std::function<void(const Pool&, workloads::Locks&)>& check) {
  auto path = tmp_path(workloads::bench_name(b));
  workloads::size_for(8, 6);
  Pool p = Pool::create(path, workloads::pool_size(b));
  workloads::init(p, b);
  Reset reset;
  Tracer t(p);
  Runtime::init(Model::arp, &p, &t);
  workloads::Locks locks;
  workloads::run(p, b, locks, 8, 6, 3);
  check(p, locks);
  if (const char* dir = std::getenv("ENGRAM_ARP_TRACE_DIR")) t.write(std::string(dir) + "/" + workloads::bench_name(b) + ".trace");
  ::unlink(path.c_str());
}

TEST(Workload, SpsKeepsAPermutation) {
  traced(workloads::Bench::sps, [](const Pool& p, workloads::Locks& locks) {
    EXPECT_EQ(locks.swaps, 48u);
    std::vector<std::uint64_t> v;
    for (std::uint64_t i = 0; i < workloads::kSpsN; ++i) v.push_back(*p.at<std::uint64_t>(workloads::kData + 8 * i));
    std::sort(v.begin(), v.end());
    for (std::uint64_t i = 0; i < workloads::kSpsN; ++i) EXPECT_EQ(v[i], i + 1);
  });
}

TEST(Workload, TatpChecksumsMatch) {
  traced(workloads::Bench::tatp, [](const Pool& p, workloads::Locks&) {
    for (std::uint64_t s = 0; s < workloads::kTatpSubs; ++s) {
      auto loc = *p.at<std::uint64_t>(workloads::kData + 16 * s);
      EXPECT_EQ(*p.at<std::uint64_t>(workloads::kData + 16 * s + 8), workloads::mix(s, loc));
    }
  });
}

TEST(Workload, YcsbRecordsAreWhole) {
  traced(workloads::Bench::ycsb_a, [](const Pool& p, workloads::Locks&) {
    for (std::uint64_t r = 0; r < workloads::kYcsbRecords; ++r) {
      auto rec = workloads::kData + 64 * r;
      auto v = *p.at<std::uint64_t>(rec);
      for (std::uint64_t f = 0; f < 4; ++f)
        EXPECT_EQ(*p.at<std::uint64_t>(rec + 8 + 8 * f), v == 0 ? workloads::mix(r, f) : workloads::mix(r, v * 8 + f));
    }
  });
}

TEST(Workload, CqHeadTailAndLiveSlotsAgree) {
  traced(workloads::Bench::cq, [](const Pool& p, workloads::Locks&) {
    using namespace workloads;
    auto h = *p.at<std::uint64_t>(cq_head()), t = *p.at<std::uint64_t>(cq_tail());
    ASSERT_LE(h, t);
    ASSERT_LE(t - h, kCqCap);
    EXPECT_GT(t, 0u);  // 48 operations, about half of them enqueues
    for (std::uint64_t k = 0; k < kCqCap; ++k) {
      std::uint64_t pos = k >= h % kCqCap ? h - h % kCqCap + k : h - h % kCqCap + kCqCap + k;
      EXPECT_EQ(pos < t, *p.at<std::uint64_t>(kData + 8 * k) != 0) << "slot " << k;
    }
  });
}

TEST(Workload, PcValuesMatchTheirVersions) {
  traced(workloads::Bench::pc, [](const Pool& p, workloads::Locks&) {
    using namespace workloads;
    std::uint64_t used = 0;
    for (std::uint64_t s = 0; s < 4 * kPcBuckets; ++s) {
      auto slot = kData + 32 * s;
      auto k = *p.at<std::uint64_t>(slot), v = *p.at<std::uint64_t>(slot + 8);
      if (k == 0) continue;
      ++used;
      EXPECT_EQ(*p.at<std::uint64_t>(slot + 16), mix(k, v)) << "slot " << s;
    }
    EXPECT_GT(used, 0u);
  });
}

TEST(Workload, TpccStockAndOrdersAddUp) {
  traced(workloads::Bench::tpcc, [](const Pool& p, workloads::Locks&) {
    using namespace workloads;
    std::uint64_t delta = 0, orders = 0;
    for (std::uint64_t d = 0; d < kTpccDistricts; ++d) {
      auto next = *p.at<std::uint64_t>(tpcc_district(d));
      orders += next;
      for (std::uint64_t o = 0; o < tpcc_orders(); ++o) {
        auto rec = tpcc_order(d, o);
        EXPECT_EQ(*p.at<std::uint64_t>(rec), o < next ? o + 1 : 0) << "district " << d << " order " << o;
        if (o < next) delta += *p.at<std::uint64_t>(rec + 16);
      }
    }
    EXPECT_EQ(orders, 48u);  // 8 workers x 6 new orders, all with room
    std::uint64_t stock = 0;
    for (std::uint64_t i = 0; i < kTpccItems; ++i) stock += *p.at<std::uint64_t>(tpcc_stock(i));
    EXPECT_EQ(stock + delta, 100 * kTpccItems);
  });
}

// The order table is sized for the run: a run far longer than the checked
// one (8 x 150 new orders) still commits every order.
TEST(Workload, TpccLongRunCommitsEveryOrder) {
  using namespace workloads;
  auto path = tmp_path("tpcc-long");
  size_for(8, 150);
  Pool p = Pool::create(path, pool_size(Bench::tpcc));
  init(p, Bench::tpcc);
  Reset reset;
  Runtime::init(Model::arp, &p);
  Locks locks;
  run(p, Bench::tpcc, locks, 8, 150, 5);
  std::uint64_t orders = 0;
  for (std::uint64_t d = 0; d < kTpccDistricts; ++d) orders += *p.at<std::uint64_t>(tpcc_district(d));
  EXPECT_EQ(orders, 8u * 150);
  size_for(8, 6);
  ::unlink(path.c_str());
}

TEST(Workload, UnknownNameIsATypedError) { EXPECT_THROW(workloads::parse_bench("tpcc-ish"), Error); }
