// arp.cpp: the pool (an RAII handle over the engine's C ABI pool, its ARP
// data region a byte-array root), the x86 mapping of each persistency
// model, and trace mode. See include/engram/arp.hpp.
#include "engram/arp.hpp"

#include "engram.h"

#include <cpuid.h>
#include <immintrin.h>

#include <fstream>
#include <utility>

namespace engram {

namespace {
Model g_model = Model::arp;
const Pool* g_pool = nullptr;
Tracer* g_tracer = nullptr;
thread_local MappingStats t_stats;

enum class FlushInsn { clwb, clflushopt, clflush };

FlushInsn detect_flush() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    if (b & (1u << 24)) return FlushInsn::clwb;
    if (b & (1u << 23)) return FlushInsn::clflushopt;
  }
  return FlushInsn::clflush;
}

const FlushInsn g_flush = detect_flush();

__attribute__((target("clwb"))) void do_clwb(const void* p) { _mm_clwb(const_cast<void*>(p)); }
__attribute__((target("clflushopt"))) void do_clflushopt(const void* p) { _mm_clflushopt(const_cast<void*>(p)); }
}  // namespace

Model parse_model(const std::string& n) {
  if (n == "scp") return Model::scp;
  if (n == "epoch") return Model::epoch;
  if (n == "rcbsp") return Model::rcbsp;
  if (n == "arp") return Model::arp;
  if (n == "arp_va" || n == "arp+va") return Model::arp_va;
  throw Error(ErrorCode::invalid_argument, "unknown persistency model: " + n);
}

const char* model_name(Model m) noexcept {
  switch (m) {
    case Model::scp: return "SCP";
    case Model::epoch: return "Epoch";
    case Model::rcbsp: return "RCBSP";
    case Model::arp: return "ARP";
    case Model::arp_va: return "ARP+VA";
  }
  return "?";
}

// ---- the pool: an RAII handle over the engine's C ABI pool ---------------

namespace {
constexpr const char* kLayout = "engram.arp";
constexpr const char* kRoot = "arp";
constexpr std::uint32_t kByteType = 1;  // the engine's built-in byte type
constexpr std::uint64_t kAlign = 64;    // the data region starts on a cache line

/// Throws the engine's error for a failed ABI call.
void check(engram_status st, const char* what) {
  if (st == ENGRAM_OK) return;
  throw Error(static_cast<ErrorCode>(st), std::string(what) + ": " + engram_code_name(st) + ": " + engram_last_error());
}

/// Runs `body(region)` in one engine region: committed if it returns,
/// aborted if it throws.
template <class F>
void in_region(engram_pool pool, F&& body) {
  engram_region r = 0;
  check(engram_region_begin(pool, &r), "engram_region_begin");
  try {
    body(r);
  } catch (...) {
    (void)engram_region_abort(r);
    throw;
  }
  check(engram_region_commit(r), "engram_region_commit");
}
}  // namespace

Pool Pool::create(const std::string& path, std::size_t size) {
  if (size == 0) throw Error(ErrorCode::invalid_argument, "pool size must be positive");
  engram_create_options o{};
  check(engram_create_options_init(&o), "engram_create_options_init");
  o.layout = kLayout;
  o.overwrite = 1;
  if (o.initial_size < 2 * size) o.initial_size = 2 * size;
  engram_pool h = 0;
  check(engram_pool_create(path.c_str(), &o, &h), "engram_pool_create");
  Pool p(h);  // closes the handle if anything below throws
  in_region(h, [&](engram_region r) {
    std::uint64_t addr = 0;
    check(engram_alloc_array(r, kByteType, size + kAlign, &addr), "engram_alloc_array");
    check(engram_root_set(r, kRoot, addr, kByteType, 1), "engram_root_set");
  });
  p.locate();
  return p;
}

Pool Pool::open(const std::string& path) {
  engram_open_options o{};
  check(engram_open_options_init(&o), "engram_open_options_init");
  o.layout = kLayout;
  engram_pool h = 0;
  check(engram_pool_open(path.c_str(), &o, &h), "engram_pool_open");
  Pool p(h);
  p.locate();
  return p;
}

void Pool::locate() {
  engram_info info{};
  check(engram_pool_info(handle_, &info), "engram_pool_info");
  pool_base_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(info.base));
  pool_size_ = static_cast<std::size_t>(info.size);
  engram_root root{};
  in_region(handle_, [&](engram_region r) { check(engram_root_get(r, kRoot, &root), "engram_root_get"); });
  if (root.found == 0 || root.array == 0 || root.type_id != kByteType || root.addr == 0)
    throw Error(ErrorCode::root_type, "pool has no ARP data region (root \"arp\": a byte array)");
  std::uint32_t type = 0, array = 0;
  std::uint64_t count = 0;
  check(engram_object_info(handle_, root.addr, &type, &count, &array), "engram_object_info");
  std::uint64_t start = (root.addr + kAlign - 1) / kAlign * kAlign;
  if (count < kAlign || start + (count - kAlign) > info.base + info.size)
    throw Error(ErrorCode::root_type, "ARP data region does not fit the pool");
  base_ = reinterpret_cast<void*>(static_cast<std::uintptr_t>(start));
  size_ = static_cast<std::size_t>(count - kAlign);
}

void Pool::release() noexcept {
  if (handle_ != 0) (void)engram_pool_close(handle_);
  handle_ = 0;
  base_ = pool_base_ = nullptr;
  size_ = pool_size_ = 0;
}

void Pool::close() {
  if (handle_ == 0) return;
  check(engram_pool_close(handle_), "engram_pool_close");
  handle_ = 0;
  base_ = pool_base_ = nullptr;
  size_ = pool_size_ = 0;
}

Pool::Pool(Pool&& o) noexcept
    : handle_(o.handle_), base_(o.base_), size_(o.size_), pool_base_(o.pool_base_), pool_size_(o.pool_size_) {
  o.handle_ = 0;
  o.base_ = o.pool_base_ = nullptr;
  o.size_ = o.pool_size_ = 0;
}

Pool& Pool::operator=(Pool&& o) noexcept {
  if (this != &o) {
    release();
    std::swap(handle_, o.handle_);
    std::swap(base_, o.base_);
    std::swap(size_, o.size_);
    std::swap(pool_base_, o.pool_base_);
    std::swap(pool_size_, o.pool_size_);
  }
  return *this;
}

Pool::~Pool() { release(); }

std::uint64_t Pool::offset_of(const void* p) const {
  if (!contains(p)) throw Error(ErrorCode::invalid_argument, "address outside the pool");
  return reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(base_);
}

// ---- runtime -------------------------------------------------------------

void Runtime::init(Model model, const Pool* pool, Tracer* tracer) noexcept {
  g_model = model;
  g_pool = pool;
  g_tracer = tracer;
}
Model Runtime::model() noexcept { return g_model; }
const Pool* Runtime::pool() noexcept { return g_pool; }
Tracer* Runtime::tracer() noexcept { return g_tracer; }
MappingStats& Runtime::stats() noexcept { return t_stats; }

// ---- the x86 mapping -----------------------------------------------------

namespace detail {

void clwb(const void* p) noexcept {
  ++t_stats.clwb;
  if (g_tracer != nullptr) g_tracer->record_other("clwb", p);
  switch (g_flush) {
    case FlushInsn::clwb: do_clwb(p); break;
    case FlushInsn::clflushopt: do_clflushopt(p); break;
    case FlushInsn::clflush: _mm_clflush(p); break;
  }
}

void sfence() noexcept {
  ++t_stats.sfence;
  if (g_tracer != nullptr) g_tracer->record_other("sfence", nullptr);
  _mm_sfence();
}

void mfence() noexcept {
  ++t_stats.mfence;
  _mm_mfence();
}

bool is_release(std::memory_order mo) noexcept {
  return mo == std::memory_order_release || mo == std::memory_order_acq_rel || mo == std::memory_order_seq_cst;
}

bool is_acquire(std::memory_order mo) noexcept {
  return mo == std::memory_order_acquire || mo == std::memory_order_consume || mo == std::memory_order_acq_rel ||
         mo == std::memory_order_seq_cst;
}

// Before the operation: the release side. Earlier persists (already CLWB'd)
// must be durable before a release becomes visible.
void before(bool /*persistent*/, bool /*acquire*/, bool release, Annotation a) noexcept {
  if (!release) return;
  switch (g_model) {
    case Model::rcbsp:
    case Model::arp:
    case Model::epoch:  // another thread's sequence point orders through hb
      sfence();
      break;
    case Model::arp_va:
      if (a != Annotation::volatile_sync) sfence();
      break;
    case Model::scp:  // every persist was fenced already
      break;
  }
}

// After the operation: write back a persist; SCP fences it, and every
// model fences a persistent acquire or release (it is ordered before what
// follows it, in this thread and, through synchronization, in others: its
// own CLWB must complete before anything later can persist). RCBSP fences
// after an acquire (a two-sided barrier). ARP needs nothing after a
// volatile acquire: on TSO no later store (so no later persist) passes the
// load. Both fences found necessary by engram-model's multi-threaded Px86
// check (crates/engram-model/tests/arp_x86_mt.rs).
void after(const void* p, bool persistent, bool store, bool acquire, bool release, Annotation a) noexcept {
  if (persistent && store) {
    ++t_stats.persists;
    clwb(p);
    bool sync = (acquire || release) && !(g_model == Model::arp_va && a == Annotation::volatile_sync);
    if (g_model == Model::scp || sync) sfence();
  }
  if (acquire && g_model == Model::rcbsp) sfence();
}

}  // namespace detail

void sequence_point() {
  if (g_tracer != nullptr) g_tracer->record_other("sp", nullptr);
  detail::sfence();
}

void full_fence() {
  if (g_tracer != nullptr) g_tracer->record_other("fence", nullptr);
  detail::mfence();
}

// ---- trace mode ----------------------------------------------------------

namespace {
struct TraceThread {
  const Tracer* owner = nullptr;
  std::uint32_t id = 0;
};
thread_local TraceThread t_trace;

const char* order_name(std::memory_order mo) {
  switch (mo) {
    case std::memory_order_relaxed: return "rlx";
    case std::memory_order_consume:
    case std::memory_order_acquire: return "acq";
    case std::memory_order_release: return "rel";
    case std::memory_order_acq_rel: return "acqrel";
    default: return "sc";
  }
}
}  // namespace

Tracer::Tracer(const Pool& pool) : pool_(pool) {
  out_ = "arp-trace 1 base=" + std::to_string(pool.size()) + "\n";
  auto* b = static_cast<const unsigned char*>(pool.base());
  char buf[24];
  for (std::size_t off = 0; off < pool.size(); off += 64) {
    std::size_t n = std::min<std::size_t>(64, pool.size() - off);
    bool zero = true;
    for (std::size_t i = 0; i < n; ++i) zero = zero && b[off + i] == 0;
    if (zero) continue;
    std::snprintf(buf, sizeof buf, "%zx", off);
    out_ += "init 0x" + std::string(buf) + " ";
    for (std::size_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%02x", b[off + i]);
      out_ += buf;
    }
    out_ += "\n";
  }
}

std::uint32_t Tracer::thread_id_locked() {
  if (t_trace.owner != this) t_trace = TraceThread{this, next_thread_++};
  return t_trace.id;
}

std::uint32_t Tracer::thread_id() {
  std::lock_guard<std::mutex> g(mu_);
  return thread_id_locked();
}

void Tracer::append(const void* addr, std::size_t len, const char* kind, std::memory_order mo, Annotation a,
                    const void* data) {
  bool pers = pool_.contains(addr);
  auto key = reinterpret_cast<std::uintptr_t>(addr);
  std::uint64_t where = pers ? pool_.offset_of(addr) : ((std::uint64_t{1} << 40) | (key & ((std::uint64_t{1} << 40) - 1)));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%u %s %s %s 0x%llx ", thread_id_locked(), kind, pers ? "p" : "v", order_name(mo),
                static_cast<unsigned long long>(where));
  std::string line = buf;
  bool is_load = std::strcmp(kind, "ld") == 0;
  if (is_load) {
    line += std::to_string(len);
  } else {
    auto* d = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < len; ++i) {
      std::snprintf(buf, sizeof buf, "%02x", d[i]);
      line += buf;
    }
  }
  if (std::strcmp(kind, "st") != 0) {
    auto it = last_writer_.find(key);
    if (it != last_writer_.end()) line += " rf=" + std::to_string(it->second);
  }
  if (a == Annotation::volatile_sync) line += " va";
  out_ += line + "\n";
  if (!is_load) last_writer_[key] = events_;
  ++events_;
}

void Tracer::record_other(const char* kind, const void* addr) {
  std::lock_guard<std::mutex> g(mu_);
  std::string line = std::to_string(thread_id_locked()) + " " + kind;
  if (addr != nullptr && pool_.contains(addr)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " 0x%llx", static_cast<unsigned long long>(pool_.offset_of(addr) / 64 * 64));
    line += buf;
  } else if (addr != nullptr) {
    return;  // a write-back of volatile memory is not part of the trace
  }
  out_ += line + "\n";
  ++events_;
}

std::string Tracer::text() const {
  std::lock_guard<std::mutex> g(mu_);
  return out_;
}

void Tracer::write(const std::string& path) const {
  std::ofstream f(path);
  f << text();
  if (!f) throw Error(ErrorCode::io, "cannot write trace " + path);
}

}  // namespace engram
