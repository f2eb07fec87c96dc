/*
 * abi_test.c: the C ABI (include/engram.h) exercised from plain C, every
 * documented error path included. Built and run by `make test-c`:
 *
 *   cc -std=c11 -Wall -Wextra -Werror -Iinclude abi_test.c libengram_ffi.a -lpthread -ldl -lm
 *   ./abi_test <scratch-dir>
 *
 * Each check prints nothing on success; a failure prints the line, the
 * status, its name and engram_last_error(), and the program exits 1. The
 * closing line reads "N passed, 0 failed".
 */
#define _GNU_SOURCE
#include "engram.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed, failed;
static char dir[512];

#define EXPECT(call, want)                                                        \
    do {                                                                          \
        engram_status s_ = (call);                                                \
        if (s_ != (want)) {                                                       \
            fprintf(stderr, "%s:%d: %s = %d (%s), want %s: %s\n", __FILE__,       \
                    __LINE__, #call, s_, engram_code_name(s_), #want,             \
                    engram_last_error());                                         \
            failed++;                                                             \
            exit(1);                                                              \
        }                                                                         \
        passed++;                                                                 \
    } while (0)
#define OK(call) EXPECT(call, ENGRAM_OK)
#define CHECK(cond)                                                               \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                       \
            failed++;                                                             \
            exit(1);                                                              \
        }                                                                         \
        passed++;                                                                 \
    } while (0)

/* The node type as the engine sees it: { u64 value; node *next; }. */
typedef struct node {
    uint64_t value;
    struct node *next;
} node;
static const uint32_t NODE_PTRS[] = {8};

static char *path_of(const char *name) {
    static char buf[8][600];
    static int i;
    char *p = buf[i++ % 8];
    snprintf(p, 600, "%s/%s", dir, name);
    unlink(p);
    return p;
}

static engram_pool create(const char *path, const char *layout, uint32_t durability, uint64_t max) {
    struct engram_create_options o;
    OK(engram_create_options_init(&o));
    o.layout = layout;
    o.durability = durability;
    if (max) o.max_size = max, o.initial_size = 0;
    engram_pool p = 0;
    OK(engram_pool_create(path, &o, &p));
    CHECK(p != 0);
    return p;
}

static uint32_t node_type(engram_pool p) {
    struct engram_type_desc d = {"c::node", sizeof(node), 8, 1, NODE_PTRS, "value:u64,next:*node"};
    uint32_t id = 0;
    OK(engram_type_register(p, &d, &id));
    CHECK(id > 3);
    return id;
}

static void test_create_open_close(void) {
    char *path = path_of("basic.pool");
    engram_pool p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    struct engram_create_options co;
    OK(engram_create_options_init(&co));
    co.layout = "abi";
    engram_pool q;
    EXPECT(engram_pool_create(path, &co, &q), ENGRAM_ERR_EXISTS);
    EXPECT(engram_pool_open(path, NULL, &q), ENGRAM_ERR_ALREADY_OPEN);
    struct engram_info info;
    OK(engram_pool_info(p, &info));
    CHECK(strcmp(info.layout, "abi") == 0 && info.base != 0 && info.size > 0);
    CHECK(info.durability == ENGRAM_DURABILITY_PROCESS);
    OK(engram_pool_close(p));
    EXPECT(engram_pool_close(p), ENGRAM_ERR_CLOSED);
    EXPECT(engram_pool_info(p, &info), ENGRAM_ERR_CLOSED);

    struct engram_open_options oo;
    OK(engram_open_options_init(&oo));
    oo.layout = "other";
    EXPECT(engram_pool_open(path, &oo, &q), ENGRAM_ERR_WRONG_LAYOUT);
    oo.layout = "abi";
    oo.durability = 99;
    EXPECT(engram_pool_open(path, &oo, &q), ENGRAM_ERR_INVALID_ARGUMENT);
    oo.durability = ENGRAM_DURABILITY_TRACE; /* without a tracer */
    EXPECT(engram_pool_open(path, &oo, &q), ENGRAM_ERR_INVALID_ARGUMENT);
    oo.durability = ENGRAM_DURABILITY_PROCESS;
    OK(engram_pool_open(path, &oo, &q));
    struct engram_open_report rep;
    OK(engram_pool_open_report(q, &rep));
    CHECK(rep.was_clean == 1);
    OK(engram_pool_close(q));

    uint32_t created = 7;
    OK(engram_pool_open_or_create(path, &co, &q, &created));
    CHECK(created == 0);
    OK(engram_pool_close(q));
    char *fresh = path_of("fresh.pool");
    co.durability = ENGRAM_DURABILITY_PROCESS;
    OK(engram_pool_open_or_create(fresh, &co, &q, &created));
    CHECK(created == 1);
    OK(engram_pool_close(q));
}

static void test_null_and_bad_arguments(void) {
    engram_pool p;
    struct engram_create_options co;
    OK(engram_create_options_init(&co));
    EXPECT(engram_pool_create(path_of("x.pool"), &co, &p), ENGRAM_ERR_INVALID_ARGUMENT); /* layout NULL */
    co.layout = "abi";
    EXPECT(engram_pool_create(NULL, &co, &p), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_pool_create(path_of("x.pool"), NULL, &p), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_pool_create(path_of("x.pool"), &co, NULL), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_create_options_init(NULL), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_pool_create("/nonexistent-dir/x.pool", &co, &p), ENGRAM_ERR_IO);
    char bad_utf8[] = {(char)0xff, (char)0xfe, 0};
    EXPECT(engram_pool_open(bad_utf8, NULL, &p), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_region_begin(12345, NULL), ENGRAM_ERR_INVALID_ARGUMENT);
    engram_region r;
    EXPECT(engram_region_begin(0, &r), ENGRAM_ERR_CLOSED);
    EXPECT(engram_region_begin(987654321, &r), ENGRAM_ERR_CLOSED);
    EXPECT(engram_region_commit(42), ENGRAM_ERR_REGION_ENDED);
    EXPECT(engram_region_log(42, 4096, 8), ENGRAM_ERR_REGION_ENDED);
    CHECK(strlen(engram_last_error()) > 0);
    CHECK(engram_last_error_code() == ENGRAM_ERR_REGION_ENDED);
    CHECK(strcmp(engram_code_name(ENGRAM_ERR_POOL_FULL), "ENGRAM_ERR_POOL_FULL") == 0);
    CHECK(strcmp(engram_code_name(555), "ENGRAM_ERR_UNKNOWN") == 0);
    CHECK(engram_abi_version() == ENGRAM_ABI_VERSION);
}

static void test_types(void) {
    engram_pool p = create(path_of("types.pool"), "abi", ENGRAM_DURABILITY_PROCESS, 0);
    uint32_t id = node_type(p), again = 0;
    struct engram_type_desc d = {"c::node", sizeof(node), 8, 1, NODE_PTRS, "value:u64,next:*node"};
    OK(engram_type_register(p, &d, &again));
    CHECK(again == id);
    uint64_t size, hash, hash2;
    uint32_t align;
    char name[32];
    OK(engram_type_info(p, id, &size, &align, &hash, name, sizeof name));
    CHECK(size == 16 && align == 8 && strcmp(name, "c::node") == 0);
    OK(engram_type_layout_hash(&d, &hash2));
    CHECK(hash == hash2);
    EXPECT(engram_type_info(p, 999, &size, &align, &hash, NULL, 0), ENGRAM_ERR_INVALID_ARGUMENT);

    struct engram_type_desc changed = d;
    changed.signature = "value:u64,next:*node,extra:u64";
    EXPECT(engram_type_register(p, &changed, &again), ENGRAM_ERR_LAYOUT_MISMATCH);
    CHECK(strstr(engram_last_error(), "c::node") != NULL);
    struct engram_type_desc bad = d;
    bad.name = NULL;
    EXPECT(engram_type_register(p, &bad, &again), ENGRAM_ERR_INVALID_ARGUMENT);
    bad = d, bad.name = "c::bad", bad.align = 3;
    EXPECT(engram_type_register(p, &bad, &again), ENGRAM_ERR_INVALID_ARGUMENT);
    static const uint32_t odd[] = {4};
    bad = d, bad.ptr_offsets = odd;
    EXPECT(engram_type_register(p, &bad, &again), ENGRAM_ERR_INVALID_ARGUMENT);
    static const uint32_t beyond[] = {16};
    bad = d, bad.ptr_offsets = beyond;
    EXPECT(engram_type_register(p, &bad, &again), ENGRAM_ERR_INVALID_ARGUMENT);
    bad = d, bad.ptr_offsets = NULL;
    EXPECT(engram_type_register(p, &bad, &again), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_type_register(p, NULL, &again), ENGRAM_ERR_INVALID_ARGUMENT);
    OK(engram_pool_close(p));
}

/* Builds a list of `n` nodes under root "list" in one region. */
static void build_list(engram_pool p, uint32_t id, int n) {
    engram_region r;
    OK(engram_region_begin(p, &r));
    node *head = NULL;
    for (int i = 0; i < n; i++) {
        uint64_t a;
        OK(engram_alloc(r, id, &a));
        node *x = (node *)(uintptr_t)a;
        CHECK(x->value == 0 && x->next == NULL); /* zeroed */
        x->value = (uint64_t)i + 1;               /* fresh: no log needed */
        x->next = head;
        head = x;
    }
    OK(engram_root_set(r, "list", (uint64_t)(uintptr_t)head, id, 0));
    OK(engram_region_commit(r));
}

static uint64_t list_sum(engram_pool p, uint32_t id) {
    engram_region r;
    OK(engram_region_begin(p, &r));
    struct engram_root root;
    OK(engram_root_get(r, "list", &root));
    CHECK(root.found == 1 && root.type_id == id && root.array == 0);
    uint64_t sum = 0;
    for (node *x = (node *)(uintptr_t)root.addr; x; x = x->next) sum += x->value;
    OK(engram_region_commit(r));
    return sum;
}

static void test_regions(void) {
    char *path = path_of("regions.pool");
    engram_pool p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    uint32_t id = node_type(p);
    build_list(p, id, 10);
    CHECK(list_sum(p, id) == 55);

    /* abort undoes a logged write */
    engram_region r, r2;
    struct engram_root root;
    OK(engram_region_begin(p, &r));
    OK(engram_root_get(r, "list", &root));
    node *head = (node *)(uintptr_t)root.addr;
    OK(engram_region_log(r, (uint64_t)(uintptr_t)&head->value, 8));
    head->value = 1000;
    OK(engram_region_abort(r));
    CHECK(head->value == 10);
    EXPECT(engram_region_commit(r), ENGRAM_ERR_REGION_ENDED);

    /* several ranges logged by one call (one fence), undone by an abort */
    OK(engram_region_begin(p, &r));
    node *second = head->next;
    uint64_t second_was = second->value;
    uint64_t many[4] = {(uint64_t)(uintptr_t)&head->value, 8, (uint64_t)(uintptr_t)&second->value, 8};
    OK(engram_region_log_many(r, many, 2));
    head->value = 3000;
    second->value = 4000;
    OK(engram_region_log_many(r, NULL, 0));
    uint64_t bad[4] = {(uint64_t)(uintptr_t)&head->value, 8, 8, 8};
    EXPECT(engram_region_log_many(r, bad, 2), ENGRAM_ERR_BAD_POINTER);
    EXPECT(engram_region_log_many(r, NULL, 1), ENGRAM_ERR_INVALID_ARGUMENT);
    OK(engram_region_abort(r));
    CHECK(head->value == 10 && second->value == second_was);

    /* nesting is flattened; an inner abort makes the outer commit roll back */
    OK(engram_region_begin(p, &r));
    OK(engram_region_begin(p, &r2));
    CHECK(r2 == r);
    uint32_t depth;
    OK(engram_region_depth(r, &depth));
    CHECK(depth == 2);
    OK(engram_region_log(r, (uint64_t)(uintptr_t)head, sizeof(node)));
    head->value = 2000;
    OK(engram_region_abort(r2));
    OK(engram_region_depth(r, &depth));
    CHECK(depth == 1);
    EXPECT(engram_region_commit(r), ENGRAM_ERR_ABORTED);
    CHECK(head->value == 10);

    /* nested commit then outer commit */
    OK(engram_region_begin(p, &r));
    OK(engram_region_begin(p, &r2));
    OK(engram_region_log(r2, (uint64_t)(uintptr_t)&head->value, 8));
    head->value = 11;
    OK(engram_region_commit(r2));
    OK(engram_region_commit(r));
    CHECK(list_sum(p, id) == 56);

    /* bad addresses, types and frees */
    OK(engram_region_begin(p, &r));
    uint64_t a;
    EXPECT(engram_region_log(r, 8, 8), ENGRAM_ERR_BAD_POINTER);                   /* outside the pool */
    EXPECT(engram_region_log(r, (uint64_t)(uintptr_t)head, 1 << 20), ENGRAM_ERR_BAD_POINTER); /* past the object */
    EXPECT(engram_region_log(r, UINT64_MAX - 4, 16), ENGRAM_ERR_BAD_POINTER);     /* overflow */
    OK(engram_region_log(r, 8, 0));                                               /* empty: nothing */
    EXPECT(engram_alloc(r, 999, &a), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_alloc(r, 3, &a), ENGRAM_ERR_INVALID_ARGUMENT);                  /* internal type */
    EXPECT(engram_alloc(r, id, NULL), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_alloc_array(r, id, UINT64_MAX / 2, &a), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_free(r, 12345), ENGRAM_ERR_BAD_POINTER);
    EXPECT(engram_free(r, (uint64_t)(uintptr_t)head + 8), ENGRAM_ERR_BAD_POINTER); /* interior */
    OK(engram_free(r, (uint64_t)(uintptr_t)head->next->next));
    EXPECT(engram_free(r, (uint64_t)(uintptr_t)head->next->next), ENGRAM_ERR_DOUBLE_FREE); /* twice */
    EXPECT(engram_root_set(r, "x", 12345, id, 0), ENGRAM_ERR_BAD_POINTER);
    EXPECT(engram_root_set(r, "", 0, id, 0), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_root_set(r, NULL, 0, id, 0), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_root_set(r, "x", 0, 999, 0), ENGRAM_ERR_INVALID_ARGUMENT);
    EXPECT(engram_collect(p, NULL), ENGRAM_ERR_BUSY);                             /* inside a region */
    EXPECT(engram_check(p, NULL), ENGRAM_ERR_BUSY);
    EXPECT(engram_pool_close(p), ENGRAM_ERR_BUSY);                                /* region running */
    OK(engram_region_abort(r));

    /* arrays, byte arrays (type 1), roots */
    OK(engram_region_begin(p, &r));
    OK(engram_alloc_array(r, 1, 100, &a));
    memcpy((void *)(uintptr_t)a, "hello", 6);
    OK(engram_root_set(r, "greeting", a, 1, 1));
    OK(engram_root_set(r, "null-root", 0, id, 0));
    OK(engram_region_commit(r));
    struct engram_root_info roots[8];
    size_t n;
    OK(engram_roots_list(p, roots, 8, &n));
    CHECK(n == 3);
    OK(engram_roots_list(p, NULL, 0, &n));
    CHECK(n == 3);
    EXPECT(engram_roots_list(p, NULL, 2, &n), ENGRAM_ERR_INVALID_ARGUMENT);
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(roots[i].name, "greeting") == 0 && roots[i].array == 1 && roots[i].type_id == 1) seen++;
    CHECK(seen == 1);
    OK(engram_region_begin(p, &r));
    uint32_t existed;
    OK(engram_root_remove(r, "null-root", &existed));
    CHECK(existed == 1);
    OK(engram_root_remove(r, "null-root", &existed));
    CHECK(existed == 0);
    OK(engram_root_get(r, "null-root", &root));
    CHECK(root.found == 0);
    OK(engram_region_commit(r));

    /* object introspection */
    uint32_t oid, oarr;
    uint64_t ocount;
    OK(engram_object_info(p, a, &oid, &ocount, &oarr));
    CHECK(oid == 1 && ocount == 100 && oarr == 1);
    OK(engram_object_info(p, (uint64_t)(uintptr_t)head, &oid, &ocount, &oarr));
    CHECK(oid == id && ocount == 1 && oarr == 0);
    EXPECT(engram_object_info(p, a + 16, &oid, &ocount, &oarr), ENGRAM_ERR_BAD_POINTER);
    EXPECT(engram_object_info(p, 0, &oid, &ocount, &oarr), ENGRAM_ERR_BAD_POINTER);

    /* persistence of a range */
    OK(engram_persist(p, (uint64_t)(uintptr_t)head, 16));
    OK(engram_flush(p, (uint64_t)(uintptr_t)head, 16));
    OK(engram_fence(p));
    EXPECT(engram_persist(p, 16, 8), ENGRAM_ERR_BAD_POINTER);
    EXPECT(engram_flush(p, UINT64_MAX - 1, 8), ENGRAM_ERR_BAD_POINTER);

    /* GC and check */
    struct engram_mark_stats st;
    OK(engram_collect(p, &st));
    CHECK(st.objects == 11); /* 10 nodes + the byte array */
    OK(engram_check(p, &st));
    CHECK(st.objects == 11);
    /* the root table holds 1024 roots (the aborted region's log chunks
       stay linked from its log slot for reuse, so this comes after the counts) */
    OK(engram_region_begin(p, &r));
    engram_status full = ENGRAM_OK;
    int made = 0;
    for (int i = 0; i < 1100 && full == ENGRAM_OK; i++) {
        char name[32];
        snprintf(name, sizeof name, "many-%d", i);
        full = engram_root_set(r, name, 0, id, 0);
        made += full == ENGRAM_OK;
    }
    CHECK(full == ENGRAM_ERR_TABLE_FULL && made > 1000);
    OK(engram_region_abort(r));

    OK(engram_pool_close(p));

    /* reopen: the data is there; a changed type is refused */
    struct engram_open_options oo;
    OK(engram_open_options_init(&oo));
    oo.layout = "abi";
    oo.durability = ENGRAM_DURABILITY_PROCESS;
    OK(engram_pool_open(path, &oo, &p));
    CHECK(list_sum(p, node_type(p)) == 56);
    struct engram_type_desc changed = {"c::node", 24, 8, 1, NODE_PTRS, "value:u64,next:*node,more:u64"};
    uint32_t cid;
    EXPECT(engram_type_register(p, &changed, &cid), ENGRAM_ERR_LAYOUT_MISMATCH);
    OK(engram_pool_close(p));
}

/* ----- threads: lock timeouts, regions are per thread ----- */

struct shared {
    engram_pool pool;
    engram_region foreign; /* a region of the main thread */
    uint64_t key;
    engram_status lock_status, commit_status, foreign_status;
};

static void *contender(void *arg) {
    struct shared *s = arg;
    engram_region r;
    if (engram_region_begin(s->pool, &r) != ENGRAM_OK) return NULL;
    s->lock_status = engram_region_lock(r, s->key);
    s->commit_status = engram_region_commit(r);
    s->foreign_status = engram_region_commit(s->foreign);
    return NULL;
}

static void test_locks_and_threads(void) {
    char *path = path_of("locks.pool");
    engram_pool p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    OK(engram_pool_close(p));
    struct engram_open_options oo;
    OK(engram_open_options_init(&oo));
    oo.durability = ENGRAM_DURABILITY_PROCESS;
    oo.lock_timeout_ms = 50;
    OK(engram_pool_open(path, &oo, &p));
    engram_region r;
    OK(engram_region_begin(p, &r));
    OK(engram_region_lock(r, 77));
    OK(engram_region_lock(r, 77)); /* re-entrant */
    struct shared s = {p, r, 77, -1, -1, -1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, contender, &s) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(s.lock_status == ENGRAM_ERR_LOCK_TIMEOUT);
    CHECK(s.commit_status == ENGRAM_ERR_ABORTED);
    CHECK(s.foreign_status == ENGRAM_ERR_REGION_ENDED); /* not its thread */
    OK(engram_region_commit(r));
    OK(engram_pool_close(p));
}

/* ----- bad files, a full pool, crash recovery ----- */

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* CRC32C (Castagnoli), bitwise: enough to forge a header in a test. */
static uint32_t crc32c(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
    }
    return ~c;
}

/* Rewrites the format version in both header copies, with valid checksums
   (docs/format.md: version at byte 8, CRC32C of bytes 0..504 at 504). */
static void forge_version(const char *path, uint32_t version) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    for (long copy = 0; copy < 2; copy++) {
        unsigned char h[512];
        fseek(f, copy * 4096, SEEK_SET);
        CHECK(fread(h, 1, sizeof h, f) == sizeof h);
        memcpy(h + 8, &version, 4);
        uint32_t crc = crc32c(h, 504);
        memcpy(h + 504, &crc, 4);
        fseek(f, copy * 4096, SEEK_SET);
        CHECK(fwrite(h, 1, sizeof h, f) == sizeof h);
    }
    fclose(f);
}

static void test_bad_files(void) {
    engram_pool p;
    char *foreign = path_of("foreign.pool");
    static char zeros[65536];
    write_file(foreign, zeros, sizeof zeros);
    EXPECT(engram_pool_open(foreign, NULL, &p), ENGRAM_ERR_NOT_A_POOL);
    EXPECT(engram_pool_open(path_of("missing.pool"), NULL, &p), ENGRAM_ERR_IO);

    char *path = path_of("trunc.pool");
    p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    OK(engram_pool_close(p));
    CHECK(truncate(path, 1 << 20) == 0);
    EXPECT(engram_pool_open(path, NULL, &p), ENGRAM_ERR_TRUNCATED);

    path = path_of("crc.pool");
    p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    OK(engram_pool_close(p));
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    for (long off = 100; off < 8192; off += 4096) { /* the layout name in both copies */
        fseek(f, off, SEEK_SET);
        fputc('X', f);
    }
    fclose(f);
    EXPECT(engram_pool_open(path, NULL, &p), ENGRAM_ERR_BAD_CHECKSUM);

    path = path_of("version.pool");
    p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    OK(engram_pool_close(p));
    forge_version(path, 2); /* the real version (format 2), forged: still opens */
    OK(engram_pool_open(path, NULL, &p));
    OK(engram_pool_close(p));
    forge_version(path, 999);
    EXPECT(engram_pool_open(path, NULL, &p), ENGRAM_ERR_UNSUPPORTED_VERSION);

    /* read-only: nothing may be written */
    path = path_of("ro.pool");
    p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    build_list(p, node_type(p), 3);
    OK(engram_pool_close(p));
    struct engram_open_options oo;
    OK(engram_open_options_init(&oo));
    oo.read_only = 1;
    OK(engram_pool_open(path, &oo, &p));
    struct engram_type_desc d = {"c::other", 8, 8, 0, NULL, NULL};
    uint32_t id;
    EXPECT(engram_type_register(p, &d, &id), ENGRAM_ERR_READ_ONLY);
    engram_region r;
    struct engram_root root;
    OK(engram_region_begin(p, &r));
    OK(engram_root_get(r, "list", &root));
    EXPECT(engram_region_log(r, root.addr, 8), ENGRAM_ERR_READ_ONLY);
    OK(engram_region_abort(r));
    EXPECT(engram_collect(p, NULL), ENGRAM_ERR_READ_ONLY);
    OK(engram_pool_close(p));
}

static void test_full_pool(void) {
    engram_pool p = create(path_of("full.pool"), "abi", ENGRAM_DURABILITY_PROCESS, 8u << 20);
    engram_region r;
    OK(engram_region_begin(p, &r));
    uint64_t a;
    engram_status s = ENGRAM_OK;
    for (int i = 0; i < 64 && s == ENGRAM_OK; i++) s = engram_alloc_array(r, 1, 1 << 20, &a);
    CHECK(s == ENGRAM_ERR_POOL_FULL);
    OK(engram_region_abort(r));
    /* the pool still works after the failed region */
    OK(engram_region_begin(p, &r));
    OK(engram_alloc_array(r, 1, 1024, &a));
    OK(engram_region_commit(r));
    OK(engram_pool_close(p));
}

static void test_recovery(void) {
    char *path = path_of("crash.pool");
    engram_pool p = create(path, "abi", ENGRAM_DURABILITY_PROCESS, 0);
    uint32_t id = node_type(p);
    build_list(p, id, 4);
    engram_region r;
    struct engram_root root;
    /* a committed region that also allocates an object it never links */
    OK(engram_region_begin(p, &r));
    OK(engram_root_get(r, "list", &root));
    node *head = (node *)(uintptr_t)root.addr;
    OK(engram_region_log(r, (uint64_t)(uintptr_t)head, 16));
    head->value = 5;
    uint64_t junk;
    OK(engram_alloc(r, id, &junk));
    /* a crash cannot be taken with a region open (abandon refuses) */
    EXPECT(engram_pool_abandon(p), ENGRAM_ERR_BUSY);
    OK(engram_region_commit(r));
    /* the crash (mid-region crashes are the explorer's job, below) */
    OK(engram_pool_abandon(p));
    EXPECT(engram_pool_close(p), ENGRAM_ERR_CLOSED);
    struct engram_open_options oo;
    OK(engram_open_options_init(&oo));
    oo.durability = ENGRAM_DURABILITY_PROCESS;
    OK(engram_pool_open(path, &oo, &p));
    struct engram_open_report rep;
    OK(engram_pool_open_report(p, &rep));
    CHECK(rep.was_clean == 0 && rep.recovered == 1 && rep.live_objects == 4);
    CHECK(list_sum(p, node_type(p)) == 11);
    /* the background recovery GC with the region card table */
    OK(engram_pool_abandon(p));
    EXPECT(engram_pool_open_recovery_gc(path, &oo, 99, &p), ENGRAM_ERR_INVALID_ARGUMENT);
    OK(engram_pool_open_recovery_gc(path, &oo, ENGRAM_RECOVERY_GC_DEFERRED_CARDS, &p));
    struct engram_recovery_gc_report gc;
    OK(engram_recovery_gc_status(p, &gc));
    CHECK(gc.state == 2 || gc.state == 3); /* pending, or already finished */
    CHECK(list_sum(p, node_type(p)) == 11);
    OK(engram_recovery_gc_wait(p, &gc));
    CHECK(gc.state == 3 && gc.live_objects == 4);
    OK(engram_pool_close(p));
}

/* ----- the crash explorer: a bank in trace mode ----- */

#define ACCOUNTS 4
static const uint32_t NO_PTRS[1] = {0};

static int bank_invariant(void *user, engram_pool pool, char *msg, size_t cap) {
    (void)user;
    engram_region r;
    struct engram_root root;
    if (engram_region_begin(pool, &r) != ENGRAM_OK) return snprintf(msg, cap, "begin: %s", engram_last_error()), 1;
    if (engram_root_get(r, "bank", &root) != ENGRAM_OK) return snprintf(msg, cap, "root: %s", engram_last_error()), 1;
    engram_region_commit(r);
    if (!root.found) return 0; /* before the bank existed */
    uint64_t *acc = (uint64_t *)(uintptr_t)root.addr, sum = 0;
    for (int i = 0; i < ACCOUNTS; i++) sum += acc[i];
    if (sum != 100 * ACCOUNTS) return snprintf(msg, cap, "money not conserved: %llu", (unsigned long long)sum), 1;
    return 0;
}

/* Transfers in traced regions; `log_both` = 0 forgets to log one write. */
static uint64_t explore_bank(int log_both) {
    char *path = path_of(log_both ? "bank.pool" : "bank-bug.pool");
    engram_tracer t;
    OK(engram_tracer_new(&t));
    struct engram_create_options o;
    OK(engram_create_options_init(&o));
    o.layout = "bank";
    o.durability = ENGRAM_DURABILITY_TRACE;
    o.tracer = t;
    o.initial_size = 0;
    o.max_size = 64u << 20;
    engram_pool p;
    OK(engram_pool_create(path, &o, &p));
    struct engram_type_desc d = {"c::u64", 8, 8, 0, NO_PTRS, NULL};
    uint32_t id;
    OK(engram_type_register(p, &d, &id));
    engram_region r;
    uint64_t a;
    OK(engram_region_begin(p, &r));
    OK(engram_alloc_array(r, id, ACCOUNTS, &a));
    uint64_t *acc = (uint64_t *)(uintptr_t)a;
    for (int i = 0; i < ACCOUNTS; i++) acc[i] = 100;
    OK(engram_root_set(r, "bank", a, id, 1));
    OK(engram_region_commit(r));
    OK(engram_tracer_start(t));
    for (int i = 0; i < 3; i++) {
        int from = i % ACCOUNTS, to = (i + 1) % ACCOUNTS;
        OK(engram_region_begin(p, &r));
        OK(engram_region_log(r, (uint64_t)(uintptr_t)&acc[from], 8));
        if (log_both) OK(engram_region_log(r, (uint64_t)(uintptr_t)&acc[to], 8));
        acc[from] -= 10;
        acc[to] += 10;
        OK(engram_region_commit(r));
    }
    uint64_t events;
    OK(engram_tracer_stop(t, &events));
    CHECK(events > 0);
    OK(engram_pool_abandon(p));
    struct engram_explore_options eo = {"bank", dir, 0, 0, 0};
    struct engram_explore_report rep;
    OK(engram_explore(t, &eo, bank_invariant, NULL, &rep));
    CHECK(rep.points > 0 && rep.images_checked > 0);
    if (rep.violations) printf("  (expected) %s\n", rep.first_violation);
    EXPECT(engram_explore(t, &eo, bank_invariant, NULL, &rep), ENGRAM_ERR_INVALID_ARGUMENT); /* trace used up */
    OK(engram_tracer_free(t));
    EXPECT(engram_tracer_free(t), ENGRAM_ERR_CLOSED);
    unlink(path);
    return rep.violations;
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "%s", argc > 1 ? argv[1] : "/tmp");
    test_create_open_close();
    test_null_and_bad_arguments();
    test_types();
    test_regions();
    test_locks_and_threads();
    test_bad_files();
    test_full_pool();
    test_recovery();
    CHECK(explore_bank(1) == 0);
    CHECK(explore_bank(0) > 0);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
