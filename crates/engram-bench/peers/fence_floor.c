/* fence_floor: what the persistence steps of one n-body region cost on this
 * CPU, with no engine around them (issue 13, docs/bench/fast-paths.md).
 *
 * Each iteration does what an Engram n-body region does to the pool: copy the
 * 280 logged bytes into an undo entry (24-byte header), write back its 5 lines
 * and fence; change the 280 data bytes; write back their lines; then commit in
 * one of several ways:
 *   3-fence   fence, bump the generation word, write it back, fence (Engram today)
 *   2-fence   a commit record written back with the data, one fence, the bump
 *             written back unfenced (branch perf's 2-fence commit; the bump's
 *             fence comes from the next region's first append)
 *   +lock     the same followed by one locked RMW (the slot bitmap's fetch_or
 *             that ends every region)
 *   entry-only the entry fence, then data and bump written back, no commit fence
 *             at all (unsound: a floor for any fence-saving protocol)
 *   no-persist the stores alone (no write-back, no fence)
 *   2-fence-late  2-fence, but the bump is not written back by the committer:
 *             the next region's entry fence writes it back with the entry
 *             (the engine since session region13r: one write-back of the bump
 *             line instead of two)
 *   2-fence-late+lock  the same followed by the locked RMW (which then waits
 *             for no write-back: the commit fence already drained them)
 *   data-only  the data lines written back and one fence, nothing logged (the
 *             floor of any protocol that makes a region's data durable at all)
 *   redo       a redo record (header, the 280 new bytes, a commit word; two
 *             alternating records) written back, ONE fence, then the data
 *             stored in place and written back unfenced (the next region's
 *             fence covers it): the floor of a one-fence redo-logged region
 *   redo-lazy  the same, but the in-place lines are written back and fenced
 *             only every 200 regions (a checkpoint of a 64 KiB log ring)
 * Prints ns per region of process CPU time. The mapping is a file on tmpfs
 * (pmem emulation), as in the pmem setup of engram-bench.
 *
 * Build and run: cc -O2 -o fence_floor fence_floor.c && ./fence_floor 200000 3 /dev/shm
 * No clwb on this CPU: exits with status 2. */
#include <cpuid.h>
#include <fcntl.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAP (1 << 20)
static inline void clwb(void *p) { asm volatile("clwb (%0)" ::"r"(p) : "memory"); }
static void wb(char *p, size_t n) {
  for (uintptr_t l = (uintptr_t)p & ~63ul; l < (uintptr_t)p + n; l += 64) clwb((void *)l);
}
static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static const char *NAMES[] = {"3-fence", "2-fence", "3-fence+lock", "2-fence+lock", "entry-only", "no-persist",
                              "2-fence-late", "data-only", "2-fence-late+lock", "redo", "redo-lazy"};

int main(int argc, char **argv) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 24))) {
    fprintf(stderr, "fence_floor: no clwb on this CPU\n");
    return 2;
  }
  long n = argc > 1 ? atol(argv[1]) : 200000;
  int rounds = argc > 2 ? atoi(argv[2]) : 3;
  char path[512];
  snprintf(path, sizeof path, "%s/fence_floor.%d", argc > 3 ? argv[3] : "/dev/shm", (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ftruncate(fd, MAP) != 0) { perror(path); return 1; }
  char *m = mmap(0, MAP, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) { perror("mmap"); return 1; }
  memset(m, 0, MAP);
  /* data 16 bytes into a line, as an array payload after its 16-byte header */
  char *data = m + 4096 + 16, *log = m + 65536 + 64;
  uint64_t *gen = (uint64_t *)(m + 65536), *bits = (uint64_t *)(m + 200000);
  for (int r = 0; r < rounds; r++)
    for (int mode = 0; mode < 11; mode++) {
      double t0 = cpu_now();
      for (long i = 0; i < n; i++) {
        if (mode == 9 || mode == 10) {
          char *rec = log + (i & 1) * 512;
          for (int k = 0; k < 280; k += 8) *(uint64_t *)(rec + 24 + k) = *(uint64_t *)(data + k) + 1;
          *(uint64_t *)rec = i;
          *(uint64_t *)(rec + 304) = i;
          wb(rec, 312); _mm_sfence();
          for (int k = 0; k < 280; k += 8) *(uint64_t *)(data + k) += 1;
          if (mode == 9) wb(data, 280);
          else if (i % 200 == 199) { wb(data, 280); _mm_sfence(); }
          continue;
        }
        if (mode == 7) {
          for (int k = 0; k < 280; k += 8) *(uint64_t *)(data + k) += 1;
          wb(data, 280); _mm_sfence();
          continue;
        }
        memcpy(log + 24, data, 280);
        *(uint64_t *)log = i;
        if (mode == 6 || mode == 8) wb((char *)gen, 8);
        if (mode != 5) { wb(log, 304); _mm_sfence(); }
        for (int k = 0; k < 280; k += 8) *(uint64_t *)(data + k) += 1;
        if (mode == 5) { *gen = i; continue; }
        wb(data, 280);
        if (mode == 0 || mode == 2) {
          _mm_sfence(); *gen = i; wb((char *)gen, 8); _mm_sfence();
        } else if (mode == 1 || mode == 3 || mode == 6 || mode == 8) {
          *(uint64_t *)(log + 304) = i; wb(log + 304, 24); _mm_sfence();
          *gen = i;
          if (mode != 6 && mode != 8) wb((char *)gen, 8);
        } else {
          *gen = i; wb((char *)gen, 8);
        }
        if (mode == 2 || mode == 3 || mode == 8) __atomic_fetch_or(bits, 1, __ATOMIC_SEQ_CST);
      }
      printf("round %d %-17s %6.0f ns/region\n", r, NAMES[mode], (cpu_now() - t0) / n * 1e9);
    }
  munmap(m, MAP);
  close(fd);
  unlink(path);
  return 0;
}
