/*
 * pmdk_peers.c -- the PMDK (libpmemobj) and malloc peers of three Engram
 * benchmark workloads, called from Rust through src/peers.rs.
 *
 * Workloads (definitions shared with src/workloads.rs, which must stay in
 * step with this file):
 *
 *   binary-trees  CLBG allocator benchmark; three variants: one transaction
 *                 per tree build and per tree free (pmdk_bt_tx), atomic
 *                 allocation per node (pmdk_bt_atomic), malloc (malloc_bt).
 *   n-body        CLBG n-body, five bodies in the pool's root object, one
 *                 transaction per step snapshotting the whole array.
 *   sps           random swaps in an array of n uint64 in the pool, all of
 *                 them inside one long transaction.
 *
 * What this file keeps true:
 *
 *   1. Every PMDK entry point creates its pool fresh (unlinking an old file
 *      at the same path first) and closes it before returning, on success
 *      and on failure alike. The pool file is left on disk for the caller.
 *   2. No entry point aborts, exits or prints. Each returns PEER_OK or a
 *      negative enum peer_status; for PMDK failures the message is left in
 *      pmemobj_errormsg() and the error number in errno (for
 *      PEER_ERR_UNLINK only errno), both thread-local, so the caller reads
 *      them on the same thread right after the call.
 *   3. Results go through out-parameters and are written only on PEER_OK.
 *      Elapsed time is CLOCK_MONOTONIC nanoseconds and never includes
 *      pmemobj_create or pmemobj_close; for sps it covers only the swapping
 *      transaction.
 *   4. Every transaction is its own small function whose locals written
 *      inside TX_BEGIN and read after it are volatile, and whose PMEMoid
 *      arguments come by pointer (a struct argument held in registers could
 *      be clobbered by the longjmp of an aborting pmemobj_tx_* call).
 *
 * Crash behaviour: these are benchmarks over throw-away pools. The
 * transactional variants are crash-consistent in the usual PMDK sense (a
 * crash rolls a transaction back); the atomic binary-trees variant may leak
 * nodes on a crash, as its real-world counterpart would without a GC.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <libpmemobj.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Status codes; mirrored by PeerStatus in src/peers.rs. */
enum peer_status {
	PEER_OK = 0,
	PEER_ERR_ARG = -1,    /* argument out of range; no pool was touched */
	PEER_ERR_UNLINK = -2, /* could not remove the old pool file; errno */
	PEER_ERR_CREATE = -3, /* pmemobj_create failed; pmemobj_errormsg */
	PEER_ERR_ROOT = -4,   /* pmemobj_root failed; pmemobj_errormsg */
	PEER_ERR_ALLOC = -5,  /* atomic allocation failed; pmemobj_errormsg */
	PEER_ERR_TX = -6,     /* a transaction aborted; pmemobj_errormsg */
	PEER_ERR_NOMEM = -7,  /* malloc returned NULL */
};

#define LAYOUT "engram_bench"
#define MIN_DEPTH 4u
#define MAX_DEPTH 40u /* 2^41 nodes: beyond any pool, far below u64 range */
#define NBODY_DT 0.01

/* Type numbers of the objects in the pools. */
enum { TYPE_BT_ROOT = 1, TYPE_BT_NODE, TYPE_NBODY_ROOT, TYPE_SPS_ROOT,
	TYPE_SPS_ARRAY };

/*
 * The job's clock: wall time, or this thread's CPU time when
 * ENGRAM_BENCH_CLOCK=cpu (as the Rust side's `clock.rs`; every timed part
 * runs on the calling thread).
 */
static uint64_t
now_ns(void)
{
	static int clock_id = -1;
	if (clock_id < 0) {
		const char *c = getenv("ENGRAM_BENCH_CLOCK");
		clock_id = c != NULL && strcmp(c, "cpu") == 0 ?
			CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
	}
	struct timespec ts;
	clock_gettime(clock_id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Removes any old file at path, then creates an empty pool there. */
static int
pool_create_fresh(const char *path, uint64_t pool_bytes, PMEMobjpool **pop)
{
	if (unlink(path) != 0 && errno != ENOENT)
		return PEER_ERR_UNLINK;
	*pop = pmemobj_create(path, LAYOUT, (size_t)pool_bytes, 0600);
	return *pop == NULL ? PEER_ERR_CREATE : PEER_OK;
}

/*
 * Closes the pool without disturbing errno, so the caller still sees the
 * errno of a failure (ENOMEM for a full pool, which pmemobj_errormsg may
 * describe less directly).
 */
static void
pool_close_keep_errno(PMEMobjpool *pop)
{
	int saved = errno;
	pmemobj_close(pop);
	errno = saved;
}

/* ------------------------------------------------------------------ */
/* binary-trees                                                       */
/* ------------------------------------------------------------------ */

/* A persistent tree node; a leaf has both children OID_NULL. */
struct pnode {
	PMEMoid left;
	PMEMoid right;
};

/* Root of a binary-trees pool: keeps the long-lived tree reachable. */
struct bt_root {
	PMEMoid long_lived;
};

static int
bt_depth_ok(uint32_t depth)
{
	return depth >= MIN_DEPTH && depth <= MAX_DEPTH;
}

static uint64_t
pcheck(PMEMoid tree)
{
	const struct pnode *n = pmemobj_direct(tree);
	if (OID_IS_NULL(n->left))
		return 1;
	return 1 + pcheck(n->left) + pcheck(n->right);
}

/* --- transactional variant: callers are inside a transaction --- */

/*
 * Builds bottom-up like CLBG. A node fresh from pmemobj_tx_alloc is new in
 * this transaction, so its fields are written without a snapshot; the
 * transaction flushes it at commit.
 */
static PMEMoid
tx_build(uint32_t depth)
{
	PMEMoid left = OID_NULL, right = OID_NULL;
	if (depth > 0) {
		left = tx_build(depth - 1);
		right = tx_build(depth - 1);
	}
	PMEMoid node = pmemobj_tx_alloc(sizeof(struct pnode), TYPE_BT_NODE);
	struct pnode *n = pmemobj_direct(node);
	n->left = left;
	n->right = right;
	return node;
}

static void
tx_free_tree(PMEMoid tree)
{
	const struct pnode *n = pmemobj_direct(tree);
	PMEMoid left = n->left, right = n->right;
	if (!OID_IS_NULL(left)) {
		tx_free_tree(left);
		tx_free_tree(right);
	}
	pmemobj_tx_free(tree);
}

/* --- one transaction each --- */

static int
bt_tx_build(PMEMobjpool *pop, uint32_t depth, PMEMoid *out)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		*out = tx_build(depth);
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

static int
bt_tx_free(PMEMobjpool *pop, const PMEMoid *tree)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		tx_free_tree(*tree);
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

/* Builds the long-lived tree and links it from the root, atomically. */
static int
bt_tx_build_long_lived(PMEMobjpool *pop, struct bt_root *root, uint32_t depth)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(&root->long_lived, sizeof(PMEMoid));
		root->long_lived = tx_build(depth);
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

/* Unlinks the long-lived tree from the root and frees it, atomically. */
static int
bt_tx_free_long_lived(PMEMobjpool *pop, struct bt_root *root)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		PMEMoid tree = root->long_lived;
		pmemobj_tx_add_range_direct(&root->long_lived, sizeof(PMEMoid));
		root->long_lived = OID_NULL;
		tx_free_tree(tree);
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

/* --- atomic (non-transactional) variant --- */

/* Builds bottom-up; on failure the nodes built so far leak in the pool. */
static int
atomic_build(PMEMobjpool *pop, uint32_t depth, PMEMoid *out)
{
	PMEMoid left = OID_NULL, right = OID_NULL;
	if (depth > 0) {
		if (atomic_build(pop, depth - 1, &left) != PEER_OK ||
		    atomic_build(pop, depth - 1, &right) != PEER_OK)
			return PEER_ERR_ALLOC;
	}
	if (pmemobj_alloc(pop, out, sizeof(struct pnode), TYPE_BT_NODE,
			NULL, NULL) != 0)
		return PEER_ERR_ALLOC;
	struct pnode *n = pmemobj_direct(*out);
	n->left = left;
	n->right = right;
	pmemobj_persist(pop, n, sizeof(*n));
	return PEER_OK;
}

static void
atomic_free(PMEMoid tree)
{
	const struct pnode *n = pmemobj_direct(tree);
	PMEMoid left = n->left, right = n->right;
	if (!OID_IS_NULL(left)) {
		atomic_free(left);
		atomic_free(right);
	}
	pmemobj_free(&tree);
}

/* --- the driver shared by both PMDK variants --- */

/* The operations that differ between the two PMDK variants. */
struct bt_ops {
	int (*build)(PMEMobjpool *pop, uint32_t depth, PMEMoid *out);
	int (*free_tree)(PMEMobjpool *pop, const PMEMoid *tree);
	int (*build_long_lived)(PMEMobjpool *, struct bt_root *, uint32_t);
	int (*free_long_lived)(PMEMobjpool *, struct bt_root *);
};

static int
bt_atomic_free(PMEMobjpool *pop, const PMEMoid *tree)
{
	(void)pop;
	atomic_free(*tree);
	return PEER_OK;
}

static int
bt_atomic_build_long_lived(PMEMobjpool *pop, struct bt_root *root,
		uint32_t depth)
{
	PMEMoid tree;
	if (atomic_build(pop, depth, &tree) != PEER_OK)
		return PEER_ERR_ALLOC;
	root->long_lived = tree;
	pmemobj_persist(pop, &root->long_lived, sizeof(PMEMoid));
	return PEER_OK;
}

static int
bt_atomic_free_long_lived(PMEMobjpool *pop, struct bt_root *root)
{
	PMEMoid tree = root->long_lived;
	root->long_lived = OID_NULL;
	pmemobj_persist(pop, &root->long_lived, sizeof(PMEMoid));
	atomic_free(tree);
	return PEER_OK;
}

static const struct bt_ops BT_TX_OPS = {
	bt_tx_build, bt_tx_free, bt_tx_build_long_lived, bt_tx_free_long_lived,
};

static const struct bt_ops BT_ATOMIC_OPS = {
	atomic_build, bt_atomic_free, bt_atomic_build_long_lived,
	bt_atomic_free_long_lived,
};

/* Builds, checks and frees one tree of depth; adds its size to *count. */
static int
bt_one_tree(PMEMobjpool *pop, const struct bt_ops *ops, uint32_t depth,
		uint64_t *count)
{
	PMEMoid tree;
	int rc = ops->build(pop, depth, &tree);
	if (rc != PEER_OK)
		return rc;
	*count += pcheck(tree);
	return ops->free_tree(pop, &tree);
}

/* The CLBG program over an open pool; *count is the sum of all checks. */
static int
bt_run(PMEMobjpool *pop, const struct bt_ops *ops, uint32_t max_depth,
		uint64_t *count)
{
	PMEMoid root_oid = pmemobj_root(pop, sizeof(struct bt_root));
	if (OID_IS_NULL(root_oid))
		return PEER_ERR_ROOT;
	struct bt_root *root = pmemobj_direct(root_oid);

	int rc = bt_one_tree(pop, ops, max_depth + 1, count);
	if (rc == PEER_OK)
		rc = ops->build_long_lived(pop, root, max_depth);
	for (uint32_t d = MIN_DEPTH; rc == PEER_OK && d <= max_depth; d += 2) {
		uint64_t iterations = UINT64_C(1) << (max_depth - d + MIN_DEPTH);
		for (uint64_t i = 0; rc == PEER_OK && i < iterations; i++)
			rc = bt_one_tree(pop, ops, d, count);
	}
	if (rc != PEER_OK)
		return rc;
	*count += pcheck(root->long_lived);
	return ops->free_long_lived(pop, root);
}

static int
pmdk_bt(const char *path, uint32_t depth, uint64_t pool_bytes,
		const struct bt_ops *ops, uint64_t *count_out,
		uint64_t *nanos_out)
{
	if (!bt_depth_ok(depth))
		return PEER_ERR_ARG;
	PMEMobjpool *pop;
	int rc = pool_create_fresh(path, pool_bytes, &pop);
	if (rc != PEER_OK)
		return rc;
	uint64_t count = 0;
	uint64_t start = now_ns();
	rc = bt_run(pop, ops, depth, &count);
	uint64_t elapsed = now_ns() - start;
	pool_close_keep_errno(pop);
	if (rc == PEER_OK) {
		*count_out = count;
		*nanos_out = elapsed;
	}
	return rc;
}

int
pmdk_bt_tx(const char *path, uint32_t depth, uint64_t pool_bytes,
		uint64_t *count_out, uint64_t *nanos_out)
{
	return pmdk_bt(path, depth, pool_bytes, &BT_TX_OPS, count_out,
			nanos_out);
}

int
pmdk_bt_atomic(const char *path, uint32_t depth, uint64_t pool_bytes,
		uint64_t *count_out, uint64_t *nanos_out)
{
	return pmdk_bt(path, depth, pool_bytes, &BT_ATOMIC_OPS, count_out,
			nanos_out);
}

/* --- malloc variant --- */

struct vnode {
	struct vnode *left;
	struct vnode *right;
};

static void
vfree(struct vnode *tree)
{
	if (tree == NULL)
		return;
	vfree(tree->left);
	vfree(tree->right);
	free(tree);
}

/* Builds bottom-up; returns NULL (having freed any part) when out of memory. */
static struct vnode *
vbuild(uint32_t depth)
{
	struct vnode *left = NULL, *right = NULL;
	if (depth > 0) {
		left = vbuild(depth - 1);
		right = left ? vbuild(depth - 1) : NULL;
		if (right == NULL) {
			vfree(left);
			return NULL;
		}
	}
	struct vnode *n = malloc(sizeof(*n));
	if (n == NULL) {
		vfree(left);
		vfree(right);
		return NULL;
	}
	n->left = left;
	n->right = right;
	return n;
}

static uint64_t
vcheck(const struct vnode *tree)
{
	if (tree->left == NULL)
		return 1;
	return 1 + vcheck(tree->left) + vcheck(tree->right);
}

static int
v_one_tree(uint32_t depth, uint64_t *count)
{
	struct vnode *tree = vbuild(depth);
	if (tree == NULL)
		return PEER_ERR_NOMEM;
	*count += vcheck(tree);
	vfree(tree);
	return PEER_OK;
}

static int
v_run(uint32_t max_depth, uint64_t *count)
{
	int rc = v_one_tree(max_depth + 1, count);
	if (rc != PEER_OK)
		return rc;
	struct vnode *long_lived = vbuild(max_depth);
	if (long_lived == NULL)
		return PEER_ERR_NOMEM;
	for (uint32_t d = MIN_DEPTH; rc == PEER_OK && d <= max_depth; d += 2) {
		uint64_t iterations = UINT64_C(1) << (max_depth - d + MIN_DEPTH);
		for (uint64_t i = 0; rc == PEER_OK && i < iterations; i++)
			rc = v_one_tree(d, count);
	}
	if (rc == PEER_OK)
		*count += vcheck(long_lived);
	vfree(long_lived);
	return rc;
}

int
malloc_bt(uint32_t depth, uint64_t *count_out, uint64_t *nanos_out)
{
	if (!bt_depth_ok(depth))
		return PEER_ERR_ARG;
	uint64_t count = 0;
	uint64_t start = now_ns();
	int rc = v_run(depth, &count);
	uint64_t elapsed = now_ns() - start;
	if (rc == PEER_OK) {
		*count_out = count;
		*nanos_out = elapsed;
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* n-body                                                             */
/* ------------------------------------------------------------------ */

/* Layout identical to workloads::Body (#[repr(C)]). */
struct body {
	double x, y, z, vx, vy, vz, mass;
};

#define NBODIES 5
#define PI 3.141592653589793
#define SOLAR_MASS (4 * PI * PI)
#define DAYS_PER_YEAR 365.24

/* Root of an n-body pool: the whole persistent state. */
struct nbody_root {
	struct body bodies[NBODIES];
};

static const struct body INITIAL_BODIES[NBODIES] = {
	{ /* sun */
		0, 0, 0, 0, 0, 0, SOLAR_MASS },
	{ /* jupiter */
		4.84143144246472090e+00, -1.16032004402742839e+00,
		-1.03622044471123109e-01, 1.66007664274403694e-03 * DAYS_PER_YEAR,
		7.69901118419740425e-03 * DAYS_PER_YEAR,
		-6.90460016972063023e-05 * DAYS_PER_YEAR,
		9.54791938424326609e-04 * SOLAR_MASS },
	{ /* saturn */
		8.34336671824457987e+00, 4.12479856412430479e+00,
		-4.03523417114321381e-01, -2.76742510726862411e-03 * DAYS_PER_YEAR,
		4.99852801234917238e-03 * DAYS_PER_YEAR,
		2.30417297573763929e-05 * DAYS_PER_YEAR,
		2.85885980666130812e-04 * SOLAR_MASS },
	{ /* uranus */
		1.28943695621391310e+01, -1.51111514016986312e+01,
		-2.23307578892655734e-01, 2.96460137564761618e-03 * DAYS_PER_YEAR,
		2.37847173959480950e-03 * DAYS_PER_YEAR,
		-2.96589568540237556e-05 * DAYS_PER_YEAR,
		4.36624404335156298e-05 * SOLAR_MASS },
	{ /* neptune */
		1.53796971148509165e+01, -2.59193146099879641e+01,
		1.79258772950371181e-01, 2.68067772490389322e-03 * DAYS_PER_YEAR,
		1.62824170038242295e-03 * DAYS_PER_YEAR,
		-9.51592254519715870e-05 * DAYS_PER_YEAR,
		5.15138902046611451e-05 * SOLAR_MASS },
};

/* Copies the initial bodies and gives the sun the opposite momentum. */
static void
nbody_init(struct body *b)
{
	double px = 0, py = 0, pz = 0;
	for (int i = 0; i < NBODIES; i++) {
		b[i] = INITIAL_BODIES[i];
		px += b[i].vx * b[i].mass;
		py += b[i].vy * b[i].mass;
		pz += b[i].vz * b[i].mass;
	}
	b[0].vx = -px / SOLAR_MASS;
	b[0].vy = -py / SOLAR_MASS;
	b[0].vz = -pz / SOLAR_MASS;
}

static void
nbody_advance(struct body *b, double dt)
{
	for (int i = 0; i < NBODIES; i++) {
		for (int j = i + 1; j < NBODIES; j++) {
			double dx = b[i].x - b[j].x;
			double dy = b[i].y - b[j].y;
			double dz = b[i].z - b[j].z;
			double d2 = dx * dx + dy * dy + dz * dz;
			double mag = dt / (d2 * sqrt(d2));
			b[i].vx -= dx * b[j].mass * mag;
			b[i].vy -= dy * b[j].mass * mag;
			b[i].vz -= dz * b[j].mass * mag;
			b[j].vx += dx * b[i].mass * mag;
			b[j].vy += dy * b[i].mass * mag;
			b[j].vz += dz * b[i].mass * mag;
		}
	}
	for (int i = 0; i < NBODIES; i++) {
		b[i].x += dt * b[i].vx;
		b[i].y += dt * b[i].vy;
		b[i].z += dt * b[i].vz;
	}
}

static double
nbody_energy(const struct body *b)
{
	double e = 0;
	for (int i = 0; i < NBODIES; i++) {
		e += 0.5 * b[i].mass *
			(b[i].vx * b[i].vx + b[i].vy * b[i].vy +
			 b[i].vz * b[i].vz);
		for (int j = i + 1; j < NBODIES; j++) {
			double dx = b[i].x - b[j].x;
			double dy = b[i].y - b[j].y;
			double dz = b[i].z - b[j].z;
			e -= b[i].mass * b[j].mass /
				sqrt(dx * dx + dy * dy + dz * dz);
		}
	}
	return e;
}

double
volatile_nbody(uint64_t steps)
{
	struct body b[NBODIES];
	nbody_init(b);
	for (uint64_t s = 0; s < steps; s++)
		nbody_advance(b, NBODY_DT);
	return nbody_energy(b);
}

/* One transaction: snapshot the whole array, write the initial state. */
static int
nbody_tx_init(PMEMobjpool *pop, const PMEMoid *root)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(*root, 0, sizeof(struct nbody_root));
		nbody_init(((struct nbody_root *)pmemobj_direct(*root))->bodies);
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

/* One transaction: snapshot the whole array (one range), advance once. */
static int
nbody_tx_step(PMEMobjpool *pop, const PMEMoid *root)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range(*root, 0, sizeof(struct nbody_root));
		nbody_advance(((struct nbody_root *)pmemobj_direct(*root))->bodies,
				NBODY_DT);
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

static int
nbody_run(PMEMobjpool *pop, uint64_t steps, double *energy)
{
	PMEMoid root = pmemobj_root(pop, sizeof(struct nbody_root));
	if (OID_IS_NULL(root))
		return PEER_ERR_ROOT;
	int rc = nbody_tx_init(pop, &root);
	for (uint64_t s = 0; rc == PEER_OK && s < steps; s++)
		rc = nbody_tx_step(pop, &root);
	if (rc == PEER_OK)
		*energy = nbody_energy(
			((struct nbody_root *)pmemobj_direct(root))->bodies);
	return rc;
}

int
pmdk_nbody(const char *path, uint64_t steps, uint64_t pool_bytes,
		double *energy_out, uint64_t *nanos_out)
{
	PMEMobjpool *pop;
	int rc = pool_create_fresh(path, pool_bytes, &pop);
	if (rc != PEER_OK)
		return rc;
	double energy = 0;
	uint64_t start = now_ns();
	rc = nbody_run(pop, steps, &energy);
	uint64_t elapsed = now_ns() - start;
	pool_close_keep_errno(pop);
	if (rc == PEER_OK) {
		*energy_out = energy;
		*nanos_out = elapsed;
	}
	return rc;
}

/* ------------------------------------------------------------------ */
/* sps                                                                */
/* ------------------------------------------------------------------ */

/* Root of an sps pool: the array and its length. */
struct sps_root {
	PMEMoid array; /* n uint64_t, TYPE_SPS_ARRAY */
	uint64_t n;
};

/* xorshift64*, as workloads::XorShift64Star; *state must be nonzero. */
static uint64_t
xorshift64star(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(0x2545F4914F6CDD1D);
}

/* Constructor of the array: a[i] = i, persisted before it is published. */
static int
sps_array_ctor(PMEMobjpool *pop, void *ptr, void *arg)
{
	uint64_t *a = ptr;
	uint64_t n = *(const uint64_t *)arg;
	for (uint64_t i = 0; i < n; i++)
		a[i] = i;
	pmemobj_persist(pop, a, n * sizeof(uint64_t));
	return 0;
}

/* Atomically allocates the initialised array into the root. */
static int
sps_setup(PMEMobjpool *pop, uint64_t n, PMEMoid *array)
{
	PMEMoid root_oid = pmemobj_root(pop, sizeof(struct sps_root));
	if (OID_IS_NULL(root_oid))
		return PEER_ERR_ROOT;
	struct sps_root *root = pmemobj_direct(root_oid);
	root->n = n;
	pmemobj_persist(pop, &root->n, sizeof(root->n));
	if (pmemobj_alloc(pop, &root->array, n * sizeof(uint64_t),
			TYPE_SPS_ARRAY, sps_array_ctor, &n) != 0)
		return PEER_ERR_ALLOC;
	*array = root->array;
	return PEER_OK;
}

/* The timed part: one transaction of `swaps` snapshotted swaps. */
static int
sps_tx_swaps(PMEMobjpool *pop, const PMEMoid *array_oid, uint64_t n,
		uint64_t swaps, uint64_t seed)
{
	volatile int rc = PEER_OK;
	TX_BEGIN(pop) {
		PMEMoid array = *array_oid;
		uint64_t *a = pmemobj_direct(array);
		uint64_t state = seed;
		for (uint64_t s = 0; s < swaps; s++) {
			uint64_t i = xorshift64star(&state) % n;
			uint64_t j = xorshift64star(&state) % n;
			pmemobj_tx_add_range(array, i * sizeof(uint64_t),
					sizeof(uint64_t));
			pmemobj_tx_add_range(array, j * sizeof(uint64_t),
					sizeof(uint64_t));
			uint64_t t = a[i];
			a[i] = a[j];
			a[j] = t;
		}
	} TX_ONABORT {
		rc = PEER_ERR_TX;
	} TX_END
	return rc;
}

static uint64_t
sps_checksum(const uint64_t *a, uint64_t n)
{
	uint64_t sum = 0;
	for (uint64_t i = 0; i < n; i++)
		sum += a[i] * (i + 1); /* unsigned: wraps by definition */
	return sum;
}

static int
sps_run(PMEMobjpool *pop, uint64_t n, uint64_t swaps, uint64_t seed,
		uint64_t *checksum, uint64_t *nanos)
{
	PMEMoid array;
	int rc = sps_setup(pop, n, &array);
	if (rc != PEER_OK)
		return rc;
	uint64_t start = now_ns();
	rc = sps_tx_swaps(pop, &array, n, swaps, seed);
	*nanos = now_ns() - start;
	if (rc == PEER_OK)
		*checksum = sps_checksum(pmemobj_direct(array), n);
	return rc;
}

int
pmdk_sps(const char *path, uint64_t n, uint64_t swaps, uint64_t seed,
		uint64_t pool_bytes, uint64_t *checksum_out, uint64_t *nanos_out)
{
	if (n == 0 || seed == 0 || n > SIZE_MAX / sizeof(uint64_t))
		return PEER_ERR_ARG;
	PMEMobjpool *pop;
	int rc = pool_create_fresh(path, pool_bytes, &pop);
	if (rc != PEER_OK)
		return rc;
	uint64_t checksum = 0, nanos = 0;
	rc = sps_run(pop, n, swaps, seed, &checksum, &nanos);
	pool_close_keep_errno(pop);
	if (rc == PEER_OK) {
		*checksum_out = checksum;
		*nanos_out = nanos;
	}
	return rc;
}
