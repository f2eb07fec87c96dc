/*
 * pmdk_stm_peers.c -- the PMDK (libpmemobj) peers of Engram's persistent-STM
 * benchmarks (`engram-bench stm`), called from Rust through
 * src/stm/pmdk.rs.
 *
 * Two maps from uint64 keys to uint64 values, in the style of the
 * OneFile/Romulus benchmark suite's PMDK data structures: every operation is
 * one libpmemobj transaction (TX_BEGIN / pmemobj_tx_add_range / TX_END)
 * taken under ONE global pthread mutex, because libpmemobj transactions give
 * failure atomicity only, not isolation.
 *
 *   red-black tree  CLRS without a sentinel (like Engram's RbTree): a node
 *                   holds key, value, left, right, parent and colour.
 *   hash table      a fixed array of chain heads; a new key is pushed at
 *                   the head of its chain (like Engram's HashTable), keys
 *                   hashed with the same hash (HashTable.v4's).
 *
 * Operations (the semantics of Engram's collections, so that the same
 * sequence of operations leaves the same contents in both):
 *
 *   get     under the mutex, no transaction (it writes nothing);
 *   insert  sets key to value (replacing an old value), one transaction;
 *   remove  removes key if present, one transaction (an empty one if the
 *           key is absent); the node is freed with pmemobj_tx_free.
 *
 * What this file keeps true:
 *
 *   1. No entry point aborts, exits or prints. Each returns STM_OK or a
 *      negative enum stm_status; for PMDK failures the message is left in
 *      pmemobj_errormsg() and the error number in errno (thread-local), so
 *      the caller reads them on the same thread right after the call.
 *   2. Every transaction is its own small function whose locals written
 *      inside TX_BEGIN and read after it are volatile, and whose PMEMoid
 *      arguments come by pointer (a longjmp out of an aborting pmemobj_tx_*
 *      call may clobber registers).
 *   3. Before a transaction first changes a node (or the root's top link,
 *      or a chain head) it snapshots the whole node (pmemobj_tx_add_range
 *      skips ranges already in the undo log), so an aborted or interrupted
 *      transaction rolls every change back.
 *   4. stm_check verifies the structure's invariants (binary-search order,
 *      parent links, red-black colour rules and black heights; every key in
 *      its own chain) and reports the number of entries and a content sum
 *      defined as in src/stm/workload.rs (content_sum).
 *
 * Crash behaviour: these are benchmarks over throw-away pools; each
 * operation is an ordinary PMDK transaction, rolled back by recovery if a
 * crash interrupts it.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <libpmemobj.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* Status codes; mirrored in src/stm/pmdk.rs. */
enum stm_status {
	STM_OK = 0,
	STM_ERR_ARG = -1,    /* argument out of range; no pool was touched */
	STM_ERR_UNLINK = -2, /* could not remove the old pool file; errno */
	STM_ERR_CREATE = -3, /* pmemobj_create failed; pmemobj_errormsg */
	STM_ERR_ROOT = -4,   /* pmemobj_root failed; pmemobj_errormsg */
	STM_ERR_TX = -6,     /* a transaction aborted; pmemobj_errormsg */
	STM_ERR_NOMEM = -7,  /* malloc returned NULL */
	STM_ERR_CHECK = -8,  /* stm_check found a broken invariant */
};

/* Structure kinds; mirrored in src/stm/pmdk.rs. */
enum stm_kind { KIND_RBTREE = 0, KIND_HASH = 1 };

#define LAYOUT "engram_bench_stm"
#define MAX_BUCKETS (UINT64_C(1) << 28)
#define MAX_CHECK_DEPTH 128

enum { TYPE_ROOT = 1, TYPE_RB_NODE, TYPE_H_NODE, TYPE_BUCKETS };

/* A red-black tree node. */
struct rb_node {
	uint64_t key;
	uint64_t value;
	PMEMoid left;
	PMEMoid right;
	PMEMoid parent; /* OID_NULL for the top */
	uint64_t red;   /* 1 red, 0 black; a null link is black */
};

/* A hash-chain node. */
struct h_node {
	uint64_t key;
	uint64_t value;
	PMEMoid next;
};

/* The pool's root object. */
struct stm_root {
	PMEMoid top;      /* red-black tree: the top node */
	PMEMoid buckets;  /* hash table: array of nbuckets chain heads */
	uint64_t nbuckets;
};

/* An open peer: its pool, its root, and the lock every operation takes. */
struct stm_peer {
	PMEMobjpool *pop;
	struct stm_root *root;
	int kind;
	pthread_mutex_t lock;
};

/*
 * The bodies of the transactions are kept out of the functions that call
 * setjmp (TX_BEGIN): none of their locals is live across a longjmp.
 */
#define TX_BODY __attribute__((noinline))

#define RB(oid) ((struct rb_node *)pmemobj_direct(oid))
#define HN(oid) ((struct h_node *)pmemobj_direct(oid))
#define SAME(a, b) ((a).off == (b).off && (a).pool_uuid_lo == (b).pool_uuid_lo)

/* ------------------------------------------------------------------ */
/* hashing: HashTable.v4's key hash for a u64 (engram's               */
/* stable_word_hash: one multiply-rotate step, murmur3 finish)          */
/* ------------------------------------------------------------------ */

static uint64_t
hash_u64(uint64_t key)
{
	uint64_t h = (UINT64_C(0x243f6a8885a308d3) ^ key) * UINT64_C(0x9e3779b97f4a7c15);
	h = (h << 26) | (h >> 38);
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	return h ^ (h >> 33);
}

/* One entry's share of the content sum (content_sum in workload.rs). */
static uint64_t
entry_sum(uint64_t key, uint64_t value)
{
	return (key * UINT64_C(0x9E3779B97F4A7C15)) ^ value;
}

/* ------------------------------------------------------------------ */
/* red-black tree; callers are inside a transaction for every write     */
/* ------------------------------------------------------------------ */

/* The node, snapshotted before its first change in this transaction. */
static struct rb_node *
rb_w(PMEMoid n)
{
	struct rb_node *p = RB(n);
	pmemobj_tx_add_range_direct(p, sizeof(*p));
	return p;
}

static int
rb_is_red(PMEMoid n)
{
	return !OID_IS_NULL(n) && RB(n)->red != 0;
}

/* Links `c` where `old` hung from `parent` (the top if parent is null). */
static void
rb_relink(struct stm_root *root, PMEMoid parent, PMEMoid old, PMEMoid c)
{
	if (OID_IS_NULL(parent)) {
		pmemobj_tx_add_range_direct(&root->top, sizeof(PMEMoid));
		root->top = c;
	} else if (SAME(RB(parent)->left, old)) {
		rb_w(parent)->left = c;
	} else {
		rb_w(parent)->right = c;
	}
}

static PMEMoid
rb_child(PMEMoid n, int right)
{
	return right ? RB(n)->right : RB(n)->left;
}

static void
rb_set_child(PMEMoid n, int right, PMEMoid c)
{
	if (right)
		rb_w(n)->right = c;
	else
		rb_w(n)->left = c;
}

/* Rotates x down towards side `right`; its child on the other side rises. */
static void
rb_rotate(struct stm_root *root, PMEMoid x, int right)
{
	PMEMoid y = rb_child(x, !right);
	PMEMoid b = rb_child(y, right);
	rb_set_child(x, !right, b);
	if (!OID_IS_NULL(b))
		rb_w(b)->parent = x;
	PMEMoid p = RB(x)->parent;
	rb_w(y)->parent = p;
	rb_relink(root, p, x, y);
	rb_set_child(y, right, x);
	rb_w(x)->parent = y;
}

static PMEMoid
rb_find(const struct stm_root *root, uint64_t key)
{
	PMEMoid cur = root->top;
	while (!OID_IS_NULL(cur)) {
		const struct rb_node *n = RB(cur);
		if (key == n->key)
			return cur;
		cur = key < n->key ? n->left : n->right;
	}
	return OID_NULL;
}

static void
rb_fix_insert(struct stm_root *root, PMEMoid z)
{
	for (;;) {
		PMEMoid p = RB(z)->parent;
		if (OID_IS_NULL(p) || !rb_is_red(p))
			break;
		PMEMoid g = RB(p)->parent; /* p is red, so not the top */
		int right = SAME(RB(g)->right, p);
		PMEMoid uncle = rb_child(g, !right);
		if (rb_is_red(uncle)) {
			rb_w(p)->red = 0;
			rb_w(uncle)->red = 0;
			rb_w(g)->red = 1;
			z = g;
			continue;
		}
		if (SAME(rb_child(p, !right), z)) {
			rb_rotate(root, p, right);
			z = p;
			p = RB(z)->parent;
		}
		rb_w(p)->red = 0;
		rb_w(g)->red = 1;
		rb_rotate(root, g, !right);
		break;
	}
	if (rb_is_red(root->top))
		rb_w(root->top)->red = 0;
}

/* Sets key to value; *existed tells whether it replaced a value. */
static TX_BODY void
rb_insert(struct stm_root *root, uint64_t key, uint64_t value, int *existed)
{
	PMEMoid parent = OID_NULL, cur = root->top;
	int right = 0;
	while (!OID_IS_NULL(cur)) {
		struct rb_node *n = RB(cur);
		if (key == n->key) {
			rb_w(cur)->value = value;
			*existed = 1;
			return;
		}
		right = key > n->key;
		parent = cur;
		cur = right ? n->right : n->left;
	}
	PMEMoid z = pmemobj_tx_alloc(sizeof(struct rb_node), TYPE_RB_NODE);
	struct rb_node *n = RB(z);
	n->key = key;
	n->value = value;
	n->left = OID_NULL;
	n->right = OID_NULL;
	n->parent = parent;
	n->red = 1;
	if (OID_IS_NULL(parent)) {
		pmemobj_tx_add_range_direct(&root->top, sizeof(PMEMoid));
		root->top = z;
	} else {
		rb_set_child(parent, right, z);
	}
	rb_fix_insert(root, z);
	*existed = 0;
}

/* Hangs v (may be null) where u hung from its parent up. */
static void
rb_replace(struct stm_root *root, PMEMoid u, PMEMoid up, PMEMoid v)
{
	rb_relink(root, up, u, v);
	if (!OID_IS_NULL(v))
		rb_w(v)->parent = up;
}

static void
rb_fix_remove(struct stm_root *root, PMEMoid x, PMEMoid xp)
{
	while (!OID_IS_NULL(xp) && !rb_is_red(x)) {
		/* As Engram's side(): x (maybe null) hangs left iff
		 * xp->left == x. */
		int right = !SAME(RB(xp)->left, x);
		PMEMoid w = rb_child(xp, !right);
		if (rb_is_red(w)) {
			rb_w(w)->red = 0;
			rb_w(xp)->red = 1;
			rb_rotate(root, xp, right);
			w = rb_child(xp, !right);
		}
		PMEMoid near = rb_child(w, right), far = rb_child(w, !right);
		if (!rb_is_red(near) && !rb_is_red(far)) {
			rb_w(w)->red = 1;
			x = xp;
			xp = RB(x)->parent;
			continue;
		}
		if (!rb_is_red(far)) {
			rb_w(near)->red = 0;
			rb_w(w)->red = 1;
			rb_rotate(root, w, !right);
			w = rb_child(xp, !right);
		}
		rb_w(w)->red = RB(xp)->red;
		rb_w(xp)->red = 0;
		rb_w(rb_child(w, !right))->red = 0;
		rb_rotate(root, xp, right);
		return;
	}
	if (rb_is_red(x))
		rb_w(x)->red = 0;
}

/* Removes key; *found tells whether it was there. Frees the node. */
static TX_BODY void
rb_remove(struct stm_root *root, uint64_t key, int *found)
{
	PMEMoid z = rb_find(root, key);
	if (OID_IS_NULL(z)) {
		*found = 0;
		return;
	}
	PMEMoid zl = RB(z)->left, zr = RB(z)->right, x, xp;
	int removed_black;
	if (OID_IS_NULL(zl) || OID_IS_NULL(zr)) {
		x = OID_IS_NULL(zl) ? zr : zl;
		xp = RB(z)->parent;
		removed_black = !rb_is_red(z);
		rb_replace(root, z, xp, x);
	} else {
		PMEMoid y = zr;
		while (!OID_IS_NULL(RB(y)->left))
			y = RB(y)->left;
		removed_black = !rb_is_red(y);
		x = RB(y)->right;
		if (SAME(y, zr)) {
			xp = y;
		} else {
			xp = RB(y)->parent;
			rb_replace(root, y, xp, x);
			rb_w(y)->right = zr;
			rb_w(zr)->parent = y;
		}
		rb_replace(root, z, RB(z)->parent, y);
		rb_w(y)->left = zl;
		rb_w(zl)->parent = y;
		rb_w(y)->red = RB(z)->red;
	}
	if (removed_black)
		rb_fix_remove(root, x, xp);
	pmemobj_tx_free(z);
	*found = 1;
}

/*
 * Checks the subtree at n (linked from parent, keys strictly between lo
 * and hi where has_lo/has_hi); returns its black height, or -1 if broken.
 */
static int
rb_check(PMEMoid n, PMEMoid parent, int has_lo, uint64_t lo, int has_hi,
		uint64_t hi, int depth, uint64_t *len, uint64_t *sum)
{
	if (OID_IS_NULL(n))
		return 1;
	const struct rb_node *p = RB(n);
	if ((has_lo && p->key <= lo) || (has_hi && p->key >= hi) ||
	    !SAME(p->parent, parent) || depth > MAX_CHECK_DEPTH || p->red > 1)
		return -1;
	if (p->red && (rb_is_red(p->left) || rb_is_red(p->right)))
		return -1;
	*len += 1;
	*sum += entry_sum(p->key, p->value);
	int bl = rb_check(p->left, n, has_lo, lo, 1, p->key, depth + 1, len,
			sum);
	int br = rb_check(p->right, n, 1, p->key, has_hi, hi, depth + 1, len,
			sum);
	if (bl < 0 || br < 0 || bl != br)
		return -1;
	return bl + (p->red == 0);
}

/* ------------------------------------------------------------------ */
/* hash table                                                         */
/* ------------------------------------------------------------------ */

static PMEMoid *
h_heads(const struct stm_root *root)
{
	return pmemobj_direct(root->buckets);
}

static PMEMoid *
h_head(const struct stm_root *root, uint64_t key)
{
	return &h_heads(root)[hash_u64(key) % root->nbuckets];
}

static PMEMoid
h_find(const struct stm_root *root, uint64_t key)
{
	PMEMoid n = *h_head(root, key);
	while (!OID_IS_NULL(n) && HN(n)->key != key)
		n = HN(n)->next;
	return n;
}

static TX_BODY void
h_insert(struct stm_root *root, uint64_t key, uint64_t value, int *existed)
{
	PMEMoid n = h_find(root, key);
	if (!OID_IS_NULL(n)) {
		struct h_node *p = HN(n);
		pmemobj_tx_add_range_direct(&p->value, sizeof(p->value));
		p->value = value;
		*existed = 1;
		return;
	}
	PMEMoid *head = h_head(root, key);
	PMEMoid m = pmemobj_tx_alloc(sizeof(struct h_node), TYPE_H_NODE);
	struct h_node *p = HN(m);
	p->key = key;
	p->value = value;
	p->next = *head;
	pmemobj_tx_add_range_direct(head, sizeof(PMEMoid));
	*head = m;
	*existed = 0;
}

static TX_BODY void
h_remove(struct stm_root *root, uint64_t key, int *found)
{
	PMEMoid *link = h_head(root, key);
	while (!OID_IS_NULL(*link) && HN(*link)->key != key)
		link = &HN(*link)->next;
	if (OID_IS_NULL(*link)) {
		*found = 0;
		return;
	}
	PMEMoid n = *link;
	pmemobj_tx_add_range_direct(link, sizeof(PMEMoid));
	*link = HN(n)->next;
	pmemobj_tx_free(n);
	*found = 1;
}

static int
h_check(const struct stm_root *root, uint64_t *len, uint64_t *sum)
{
	const PMEMoid *heads = h_heads(root);
	for (uint64_t i = 0; i < root->nbuckets; i++) {
		for (PMEMoid n = heads[i]; !OID_IS_NULL(n); n = HN(n)->next) {
			const struct h_node *p = HN(n);
			if (hash_u64(p->key) % root->nbuckets != i)
				return STM_ERR_CHECK;
			for (PMEMoid m = p->next; !OID_IS_NULL(m);
					m = HN(m)->next)
				if (HN(m)->key == p->key)
					return STM_ERR_CHECK;
			*len += 1;
			*sum += entry_sum(p->key, p->value);
		}
	}
	return STM_OK;
}

/* ------------------------------------------------------------------ */
/* transactions                                                       */
/* ------------------------------------------------------------------ */

/* Inserts n pairs in one transaction (the untimed prefill). */
static int
tx_insert_batch(struct stm_peer *p, const uint64_t *keys,
		const uint64_t *values, size_t n)
{
	volatile int rc = STM_OK;
	TX_BEGIN(p->pop) {
		int existed;
		for (size_t i = 0; i < n; i++) {
			if (p->kind == KIND_RBTREE)
				rb_insert(p->root, keys[i], values[i], &existed);
			else
				h_insert(p->root, keys[i], values[i], &existed);
		}
	} TX_ONABORT {
		rc = STM_ERR_TX;
	} TX_END
	return rc;
}

static int
tx_insert(struct stm_peer *p, uint64_t key, uint64_t value, int *existed)
{
	volatile int rc = STM_OK;
	TX_BEGIN(p->pop) {
		if (p->kind == KIND_RBTREE)
			rb_insert(p->root, key, value, existed);
		else
			h_insert(p->root, key, value, existed);
	} TX_ONABORT {
		rc = STM_ERR_TX;
	} TX_END
	return rc;
}

static int
tx_remove(struct stm_peer *p, uint64_t key, int *found)
{
	volatile int rc = STM_OK;
	TX_BEGIN(p->pop) {
		if (p->kind == KIND_RBTREE)
			rb_remove(p->root, key, found);
		else
			h_remove(p->root, key, found);
	} TX_ONABORT {
		rc = STM_ERR_TX;
	} TX_END
	return rc;
}

/* Allocates the bucket array and links it from the root, atomically. */
static int
tx_make_buckets(PMEMobjpool *pop, struct stm_root *root, uint64_t nbuckets)
{
	volatile int rc = STM_OK;
	TX_BEGIN(pop) {
		pmemobj_tx_add_range_direct(root, sizeof(*root));
		root->buckets = pmemobj_tx_zalloc(nbuckets * sizeof(PMEMoid),
				TYPE_BUCKETS);
		root->nbuckets = nbuckets;
	} TX_ONABORT {
		rc = STM_ERR_TX;
	} TX_END
	return rc;
}

/* ------------------------------------------------------------------ */
/* entry points                                                       */
/* ------------------------------------------------------------------ */

/*
 * Creates a fresh pool at path (removing any old file) holding an empty
 * structure of `kind` (nbuckets chains for the hash table).
 */
int
stm_create(const char *path, int kind, uint64_t nbuckets,
		uint64_t pool_bytes, struct stm_peer **out)
{
	if ((kind != KIND_RBTREE && kind != KIND_HASH) ||
	    (kind == KIND_HASH && (nbuckets == 0 || nbuckets > MAX_BUCKETS)))
		return STM_ERR_ARG;
	struct stm_peer *p = malloc(sizeof(*p));
	if (p == NULL)
		return STM_ERR_NOMEM;
	if (unlink(path) != 0 && errno != ENOENT) {
		free(p);
		return STM_ERR_UNLINK;
	}
	p->pop = pmemobj_create(path, LAYOUT, (size_t)pool_bytes, 0600);
	if (p->pop == NULL) {
		free(p);
		return STM_ERR_CREATE;
	}
	PMEMoid r = pmemobj_root(p->pop, sizeof(struct stm_root));
	int rc = OID_IS_NULL(r) ? STM_ERR_ROOT : STM_OK;
	if (rc == STM_OK) {
		p->root = pmemobj_direct(r);
		p->kind = kind;
		if (kind == KIND_HASH)
			rc = tx_make_buckets(p->pop, p->root, nbuckets);
	}
	if (rc == STM_OK && pthread_mutex_init(&p->lock, NULL) != 0)
		rc = STM_ERR_NOMEM;
	if (rc != STM_OK) {
		int saved = errno;
		pmemobj_close(p->pop);
		free(p);
		errno = saved;
		return rc;
	}
	*out = p;
	return STM_OK;
}

/* Closes the pool and frees the peer (the pool file stays). */
void
stm_close(struct stm_peer *p)
{
	pthread_mutex_destroy(&p->lock);
	pmemobj_close(p->pop);
	free(p);
}

int
stm_get(struct stm_peer *p, uint64_t key, uint64_t *value_out, int *found)
{
	pthread_mutex_lock(&p->lock);
	PMEMoid n = p->kind == KIND_RBTREE ? rb_find(p->root, key) :
			h_find(p->root, key);
	*found = !OID_IS_NULL(n);
	if (*found)
		*value_out = p->kind == KIND_RBTREE ? RB(n)->value :
				HN(n)->value;
	pthread_mutex_unlock(&p->lock);
	return STM_OK;
}

int
stm_insert(struct stm_peer *p, uint64_t key, uint64_t value, int *existed)
{
	pthread_mutex_lock(&p->lock);
	int rc = tx_insert(p, key, value, existed);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int
stm_remove(struct stm_peer *p, uint64_t key, int *found)
{
	pthread_mutex_lock(&p->lock);
	int rc = tx_remove(p, key, found);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int
stm_insert_batch(struct stm_peer *p, const uint64_t *keys,
		const uint64_t *values, size_t n)
{
	pthread_mutex_lock(&p->lock);
	int rc = tx_insert_batch(p, keys, values, n);
	pthread_mutex_unlock(&p->lock);
	return rc;
}

/* Verifies the invariants; on STM_OK reports entries and content sum. */
int
stm_check(struct stm_peer *p, uint64_t *len_out, uint64_t *sum_out)
{
	uint64_t len = 0, sum = 0;
	int rc;
	pthread_mutex_lock(&p->lock);
	if (p->kind == KIND_RBTREE) {
		rc = rb_is_red(p->root->top) ||
			rb_check(p->root->top, OID_NULL, 0, 0, 0, 0, 1, &len,
					&sum) < 0 ? STM_ERR_CHECK : STM_OK;
	} else {
		rc = h_check(p->root, &len, &sum);
	}
	pthread_mutex_unlock(&p->lock);
	if (rc == STM_OK) {
		*len_out = len;
		*sum_out = sum;
	}
	return rc;
}
