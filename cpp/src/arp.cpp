// arp.cpp: the pool seam (file-backed mmap), the x86 mapping of each
// persistency model, and trace mode. See include/engram/arp.hpp.
#include "engram/arp.hpp"

#include <cpuid.h>
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

namespace engram {

namespace {
Model g_model = Model::arp;
const Pool* g_pool = nullptr;
Tracer* g_tracer = nullptr;
thread_local MappingStats t_stats;

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

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

// ---- the pool seam -------------------------------------------------------

Pool Pool::create(const std::string& path, std::size_t size) {
  if (size == 0) throw Error(ErrorCode::invalid_argument, "pool size must be positive");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error(ErrorCode::io, sys_error("open " + path));
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    ::close(fd);
    throw Error(ErrorCode::io, sys_error("ftruncate " + path));
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) throw Error(ErrorCode::io, sys_error("mmap " + path));
  return Pool(base, size);
}

Pool Pool::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR);
  if (fd < 0) throw Error(ErrorCode::io, sys_error("open " + path));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw Error(ErrorCode::invalid_argument, "not a pool (empty or unreadable): " + path);
  }
  auto size = static_cast<std::size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) throw Error(ErrorCode::io, sys_error("mmap " + path));
  return Pool(base, size);
}

Pool::Pool(Pool&& o) noexcept : base_(o.base_), size_(o.size_) {
  o.base_ = nullptr;
  o.size_ = 0;
}

Pool& Pool::operator=(Pool&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = o.base_;
    size_ = o.size_;
    o.base_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

Pool::~Pool() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

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
    case Model::arp: sfence(); break;
    case Model::arp_va:
      if (a != Annotation::volatile_sync) sfence();
      break;
    case Model::scp:    // every persist was fenced already
    case Model::epoch:  // releases order nothing; sequence points do
      break;
  }
}

// After the operation: write back a persist; SCP fences it; RCBSP fences
// after an acquire (a two-sided barrier). ARP needs nothing after an
// acquire: on TSO no later store (so no later persist) passes the load.
void after(const void* p, bool persistent, bool store, bool acquire, Annotation /*a*/) noexcept {
  if (persistent && store) {
    ++t_stats.persists;
    clwb(p);
    if (g_model == Model::scp) sfence();
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
