/* The CLWB probe of docs/stm.md round 26 (stm21upd): on this CPU, does a
 * line written back by CLWB stay in the cache, and how much does each
 * line written back before an SFENCE add to the fence's wait? Also: does
 * a locked instruction wait for an earlier CLWB, and not once it drained?
 * Build and run (a 64 MiB file on tmpfs, removed at exit):
 *   gcc -O2 -o /tmp/clwb-probe docs/bench/stm-clwb-probe.c && /tmp/clwb-probe
 * Figures are medians (cycles, rdtscp) and thread CPU ns per operation;
 * compare within one run only. */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <x86intrin.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
static inline void clwb(void*p){asm volatile("clwb (%0)"::"r"(p):"memory");}
static inline void clflushopt(void*p){asm volatile("clflushopt (%0)"::"r"(p):"memory");}
static inline uint64_t rd(){unsigned a; _mm_lfence(); uint64_t t=__rdtscp(&a); _mm_lfence(); return t;}
static double now(){struct timespec ts; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&ts); return ts.tv_sec*1e9+ts.tv_nsec;}
int cmp(const void*a,const void*b){uint64_t x=*(uint64_t*)a,y=*(uint64_t*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  size_t sz=64<<20; int fd=open("/dev/shm/stm21upd-clwb",O_RDWR|O_CREAT,0600); ftruncate(fd,sz);
  char*m=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); memset(m,1,sz);
  enum{N=20000}; static uint64_t t[N];
  // Part 1: retention. write a line, (none|clwb|clflushopt), sfence, then time a load of it.
  const char*names[]={"none","clwb","clflushopt"};
  for(int mode=0;mode<3;mode++){
    for(int i=0;i<N;i++){
      volatile char*p=m+((size_t)(i*7919)%(sz/64))*64;
      p[0]=i; if(mode==1)clwb((void*)p); if(mode==2)clflushopt((void*)p); _mm_sfence();
      for(volatile int d=0;d<200;d++);
      uint64_t a=rd(); (void)p[8]; uint64_t b=rd(); t[i]=b-a;}
    qsort(t,N,8,cmp); printf("load after %-10s: median %lu p10 %lu p90 %lu cycles\n",names[mode],t[N/2],t[N/10],t[N*9/10]);
  }
  // Part 2: cost of write k lines (random) + clwb + sfence, CPU ns per op.
  int iters=200000;
  for(int rep=0;rep<2;rep++)
  for(int k=0;k<=4;k++){
    for(int mode=0;mode<2;mode++){
      double s=now(); unsigned x=12345;
      for(int i=0;i<iters;i++){
        for(int j=0;j<k;j++){ x=x*1103515245+12345; volatile char*p=m+((size_t)(x>>4)%(sz/64))*64; p[0]=i; if(mode)clwb((void*)p);} 
        if(mode)_mm_sfence();
        for(volatile int d=0;d<50;d++);
      }
      printf("k=%d %s: %.1f ns/op\n",k,mode?"clwb+sfence":"plain     ",(now()-s)/iters);
    }
  }
  // Part 3: same line rewritten every other op (the log half) with clwb+sfence: k lines same addresses.
  for(int mode=0;mode<2;mode++){
    double s=now();
    for(int i=0;i<iters;i++){ volatile char*p=m+(i%2)*4096; p[0]=i;p[64]=i; if(mode){clwb((void*)p);clwb((void*)(p+64));_mm_sfence();} for(volatile int d=0;d<50;d++);}
    printf("log-like 2 lines %s: %.1f ns/op\n",mode?"clwb+sfence":"plain",(now()-s)/iters);
  }
  // Part 4: clwb issued, then a locked instruction: cost vs without
  static volatile long lk;
  for(int mode=0;mode<3;mode++){
    double s=now(); unsigned x=1;
    for(int i=0;i<iters;i++){ x=x*1103515245+12345; volatile char*p=m+((size_t)(x>>4)%(sz/64))*64; p[0]=i; if(mode)clwb((void*)p);
      if(mode==2){for(volatile int d=0;d<300;d++);} __sync_fetch_and_add(&lk,1); if(mode!=2) for(volatile int d=0;d<300;d++); _mm_sfence();}
    printf("clwb then lock xadd (%s): %.1f ns/op\n",mode==0?"no clwb":mode==1?"immediately":"after 300 spins",(now()-s)/iters);
  }
  unlink("/dev/shm/stm21upd-clwb"); return 0;}
