/* dp.c — balanced global batches and the sample exchange (see dp.h). */
#include "gpu/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "exchange.h"
#include "gpu/devmem.h"

struct dp {
    comm_t *c;
    dp_options o;
    int R, n;               /* virtual ranks in all, samples in the global batch */
    long max_tokens;
    shard_batch own;        /* this rank's loaded K B samples */
    exchange_sample *own_s; /* (K B) views of own */
    int *len, *npred;       /* (n) all-gathered */
    int32_t *pairs;         /* (2 n) host: (len, npred) per sample, loader order */
    int32_t *d_pairs;       /* (2 n) device, for the all-gather */
    int64_t *w;             /* (n) balanced weights */
    int *owner;             /* (n) loading rank */
    balance_ws *ws;
    balance_result res;     /* over R virtual ranks */
    balance_result phys;    /* the same over the ranks (gpu = virtual rank / K) */
    int32_t **sendbuf, **recvbuf;   /* (ranks) host */
    int64_t *sendcap, *recvcap;
    int32_t **d_send, **d_recv;     /* (ranks) device */
    int64_t *d_cap;
    exchange_sample *got;   /* (n) received samples, by global index (pointers into recvbuf) */
    int *got_rank;          /* (n) virtual rank (local) or -1 */
    int *order;             /* (n) scratch */
    int *count;             /* (K) samples of each local virtual rank in the last step */
    cudaStream_t s;
};

static int grow(int32_t **buf, int64_t *cap, int64_t need)
{
    if (need <= *cap)
        return 0;
    int32_t *nb = realloc(*buf, sizeof **buf * (size_t)need);
    if (!nb)
        return 1;
    *buf = nb;
    *cap = need;
    return 0;
}

dp *dp_create(comm_t *c, const dp_options *o, long max_tokens, unpad_err *err)
{
    dp *d = calloc(1, sizeof *d);
    if (!d) {
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory");
        return NULL;
    }
    d->c = c;
    d->o = *o;
    d->R = c->size * o->K;
    d->n = d->R * o->B;
    d->max_tokens = max_tokens;
    int n = d->n, P = c->size, own = o->K * o->B;
    int bad = shard_batch_alloc(&d->own, own, (long)own * o->max_len, (long)own * o->max_pred);
    d->own_s = calloc((size_t)own, sizeof *d->own_s);
    d->len = malloc(sizeof *d->len * (size_t)n);
    d->npred = malloc(sizeof *d->npred * (size_t)n);
    d->pairs = malloc(sizeof *d->pairs * 2 * (size_t)n);
    d->w = malloc(sizeof *d->w * (size_t)n);
    d->owner = malloc(sizeof *d->owner * (size_t)n);
    d->sendbuf = calloc((size_t)P, sizeof *d->sendbuf);
    d->recvbuf = calloc((size_t)P, sizeof *d->recvbuf);
    d->sendcap = calloc((size_t)P, sizeof *d->sendcap);
    d->recvcap = calloc((size_t)P, sizeof *d->recvcap);
    d->d_send = calloc((size_t)P, sizeof *d->d_send);
    d->d_recv = calloc((size_t)P, sizeof *d->d_recv);
    d->d_cap = calloc((size_t)P, sizeof *d->d_cap);
    d->got = calloc((size_t)n, sizeof *d->got);
    d->got_rank = malloc(sizeof *d->got_rank * (size_t)n);
    d->order = malloc(sizeof *d->order * (size_t)n);
    d->count = calloc((size_t)o->K, sizeof *d->count);
    if (bad || !d->own_s || !d->len || !d->npred || !d->pairs || !d->w || !d->owner || !d->sendbuf ||
        !d->recvbuf || !d->sendcap || !d->recvcap || !d->d_send || !d->d_recv || !d->d_cap || !d->got ||
        !d->got_rank || !d->order || !d->count) {
        dp_free(d);
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for the data-parallel batch");
        return NULL;
    }
    if (balance_ws_alloc(n, d->R, &d->ws, err) || balance_result_alloc(n, d->R, &d->res, err) ||
        balance_result_alloc(n, P, &d->phys, err)) {
        dp_free(d);
        return NULL;
    }
    /* loader order: rank r loaded [r K B, (r + 1) K B) */
    for (int i = 0; i < n; i++)
        d->owner[i] = i / own;
    if (dev_alloc((void **)&d->d_pairs, sizeof *d->d_pairs * 2 * (size_t)n, "the batch's lengths", err)) {
        dp_free(d);
        return NULL;
    }
    cudaCheck(cudaStreamCreateWithFlags(&d->s, cudaStreamNonBlocking));
    return d;
}

void dp_free(dp *d)
{
    if (!d)
        return;
    int P = d->c->size;
    for (int p = 0; p < P; p++) {
        if (d->sendbuf) free(d->sendbuf[p]);
        if (d->recvbuf) free(d->recvbuf[p]);
        if (d->d_send && d->d_send[p]) cudaFree(d->d_send[p]);
        if (d->d_recv && d->d_recv[p]) cudaFree(d->d_recv[p]);
    }
    if (d->d_pairs) cudaFree(d->d_pairs);
    if (d->s) cudaStreamDestroy(d->s);
    shard_batch_free(&d->own);
    balance_ws_free(d->ws);
    balance_result_free(&d->res);
    balance_result_free(&d->phys);
    free(d->own_s); free(d->len); free(d->npred); free(d->pairs); free(d->w); free(d->owner);
    free(d->sendbuf); free(d->recvbuf); free(d->sendcap); free(d->recvcap);
    free(d->d_send); free(d->d_recv); free(d->d_cap);
    free(d->got); free(d->got_rank); free(d->order); free(d->count);
    free(d);
}

void dp_set_cost(dp *d, seq_cost cost) { d->o.cost = cost; }

int dp_rank_lengths(const dp *d, int g, int *len)
{
    if (g < 0 || g >= d->R)
        return 0;
    int m = 0;
    for (int k = d->res.start[g]; k < d->res.start[g + 1]; k++)
        len[m++] = d->len[d->res.seq[k]];
    return m;
}

long dp_global_predictions(const dp *d)
{
    long p = 0;
    for (int i = 0; i < d->n; i++)
        p += d->npred[i];
    return p;
}

void dp_after(dp *d, cudaEvent_t ev)
{
    cudaCheck(cudaStreamWaitEvent(d->s, ev, 0));
}

typedef struct {
    dp *d;
    int base; /* global index of own[0] */
} own_ctx;

static const exchange_sample *get_own(void *ctx, int i)
{
    own_ctx *o = ctx;
    int k = i - o->base;
    return k >= 0 && k < o->d->o.K * o->d->o.B ? &o->d->own_s[k] : NULL;
}

static int put_got(void *ctx, int i, const exchange_sample *s)
{
    dp *d = ctx;
    int v = d->res.gpu[i] - d->c->rank * d->o.K;
    if (v < 0 || v >= d->o.K)
        return UNPAD_EINVAL;
    d->got[i] = *s; /* views into the receive buffer, alive until the next step */
    d->got_rank[i] = v;
    return UNPAD_OK;
}

static const dp *g_sort_dp; /* qsort has no context; dp_step is not reentrant per process */
static int longest_first(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    int li = g_sort_dp->got[i].len, lj = g_sort_dp->got[j].len;
    if (li != lj)
        return lj - li;
    return i - j;
}

/* Appends the samples order[0..m) (global indices) to micro-batch b, longest first. */
static int fill_micro(dp *d, const int *order, int m, shard_batch *b, unpad_err *err)
{
    b->n = 0;
    b->T = 0;
    b->P = 0;
    b->max_seqlen = 0;
    b->cu_seqlens[0] = 0;
    for (int k = 0; k < m; k++) {
        const exchange_sample *s = &d->got[order[k]];
        if (k >= b->cap_seqs || b->T + s->len > b->cap_tokens || b->P + s->npred > b->cap_masked)
            return unpad_fail(err, UNPAD_ERANGE, NULL, 0,
                              "a balanced micro-batch of %d sequences needs more than its buffers "
                              "(%d sequences, %ld tokens, %ld masks): use --count equal or a larger "
                              "--max-tokens", m, b->cap_seqs, b->cap_tokens, b->cap_masked);
        for (int t = 0; t < s->len; t++) {
            b->tokens[b->T + t] = s->tokens[t];
            b->segments[b->T + t] = s->segments[t];
            b->positions[b->T + t] = t;
        }
        for (int q = 0; q < s->npred; q++) {
            b->mpos[b->P + q] = (int32_t)b->T + s->mpos[q];
            b->mlabels[b->P + q] = s->mlabel[q];
            b->mseq[b->P + q] = k;
        }
        b->nsp[k] = s->nsp;
        b->T += s->len;
        b->P += s->npred;
        b->n = k + 1;
        b->cu_seqlens[k + 1] = (int32_t)b->T;
        if (s->len > b->max_seqlen)
            b->max_seqlen = s->len;
    }
    return UNPAD_OK;
}

int dp_step(dp *d, batch_source *src, int64_t pos, shard_batch *mb, double *pred_us, unpad_err *err)
{
    comm_t *c = d->c;
    int K = d->o.K, B = d->o.B, own = K * B, n = d->n, P = c->size, me = c->rank;
    int base = me * own;
    /* 1. this rank's slice of the global batch, in loader order */
    int rc = source_get(src, pos + base, own, &d->own, err);
    if (rc)
        return rc;
    int mp = 0;
    for (int k = 0; k < own; k++) {
        exchange_sample *s = &d->own_s[k];
        int t0 = d->own.cu_seqlens[k], t1 = d->own.cu_seqlens[k + 1];
        s->len = t1 - t0;
        s->tokens = d->own.tokens + t0;
        s->segments = d->own.segments + t0;
        s->nsp = d->own.nsp[k];
        int q0 = mp;
        while (mp < d->own.P && d->own.mseq[mp] == k)
            mp++;
        s->npred = mp - q0;
        s->mlabel = d->own.mlabels + q0;
        /* positions within the sample: shard_batch keeps them as packed indices */
        for (int q = q0; q < mp; q++)
            d->own.mpos[q] -= t0;
        s->mpos = d->own.mpos + q0;
        d->pairs[2 * (base + k)] = s->len;
        d->pairs[2 * (base + k) + 1] = s->npred;
    }
    /* 2. all-gather the (length, predictions) of every sample */
    if (P > 1 || comm_uses_nccl(c)) { /* one rank under a launcher goes through NCCL too */
        cudaCheck(cudaMemcpyAsync(d->d_pairs + 2 * base, d->pairs + 2 * base, sizeof(int32_t) * 2 * own,
                                  cudaMemcpyHostToDevice, d->s));
        comm_allgather_i32(c, d->d_pairs + 2 * base, d->d_pairs, 2 * (size_t)own, d->s);
        cudaCheck(cudaMemcpyAsync(d->pairs, d->d_pairs, sizeof(int32_t) * 2 * n, cudaMemcpyDeviceToHost, d->s));
        cudaCheck(cudaStreamSynchronize(d->s));
    }
    for (int i = 0; i < n; i++) {
        d->len[i] = d->pairs[2 * i];
        d->npred[i] = d->pairs[2 * i + 1];
    }
    /* 3. the same assignment on every rank */
    balance_weights(d->o.tokens ? NULL : &d->o.cost, d->len, n, d->w);
    balance_input in = {.len = d->len, .w = d->w, .n = n, .gpus = d->R, .policy = d->o.policy,
                        .count = d->o.count};
    if ((rc = balance_assign(d->ws, &in, &d->res, err)))
        return rc;
    if (pred_us)
        for (int g = 0; g < d->R; g++)
            pred_us[g] = (double)d->res.load[g] / (d->o.tokens ? 1.0 : BALANCE_NS_PER_US);
    d->phys.n = n;
    d->phys.gpus = P;
    for (int i = 0; i < n; i++)
        d->phys.gpu[i] = d->res.gpu[i] / K;
    /* 4. the exchange: pack per destination, move, unpack */
    exchange_plan plan;
    if ((rc = exchange_plan_build(&d->phys, d->owner, d->len, d->npred, &plan, err)))
        return rc;
    own_ctx oc = {d, base};
    for (int q = 0; q < P; q++) {
        int64_t ws = plan.words[me * P + q], wr = plan.words[q * P + me];
        if (grow(&d->sendbuf[q], &d->sendcap[q], ws > 0 ? ws : 1) ||
            grow(&d->recvbuf[q], &d->recvcap[q], wr > 0 ? wr : 1)) {
            exchange_plan_free(&plan);
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for the exchange");
        }
        if ((rc = exchange_pack(&plan, me, q, get_own, &oc, d->sendbuf[q], err))) {
            exchange_plan_free(&plan);
            return rc;
        }
    }
    /* what stays on this rank is its own send buffer */
    memcpy(d->recvbuf[me], d->sendbuf[me], sizeof(int32_t) * (size_t)plan.words[me * P + me]);
    if (P > 1) {
        int64_t *sw = calloc((size_t)P, sizeof *sw), *rw = calloc((size_t)P, sizeof *rw);
        if (!sw || !rw) {
            free(sw);
            free(rw);
            exchange_plan_free(&plan);
            return unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of memory for the exchange");
        }
        for (int q = 0; q < P; q++) {
            if (q == me)
                continue;
            sw[q] = plan.words[me * P + q];
            rw[q] = plan.words[q * P + me];
            int64_t need = sw[q] > rw[q] ? sw[q] : rw[q];
            if (need > d->d_cap[q]) {
                if (d->d_send[q]) cudaCheck(cudaFree(d->d_send[q]));
                if (d->d_recv[q]) cudaCheck(cudaFree(d->d_recv[q]));
                d->d_cap[q] = 0;
                d->d_send[q] = d->d_recv[q] = NULL;
                if ((rc = dev_alloc((void **)&d->d_send[q], sizeof(int32_t) * (size_t)need, "the exchange", err)) ||
                    (rc = dev_alloc((void **)&d->d_recv[q], sizeof(int32_t) * (size_t)need, "the exchange", err))) {
                    free(sw);
                    free(rw);
                    exchange_plan_free(&plan);
                    return rc;
                }
                d->d_cap[q] = need;
            }
            if (sw[q])
                cudaCheck(cudaMemcpyAsync(d->d_send[q], d->sendbuf[q], sizeof(int32_t) * (size_t)sw[q],
                                          cudaMemcpyHostToDevice, d->s));
        }
        comm_exchange_i32(c, d->d_send, sw, d->d_recv, rw, d->s);
        for (int q = 0; q < P; q++)
            if (q != me && rw[q])
                cudaCheck(cudaMemcpyAsync(d->recvbuf[q], d->d_recv[q], sizeof(int32_t) * (size_t)rw[q],
                                          cudaMemcpyDeviceToHost, d->s));
        cudaCheck(cudaStreamSynchronize(d->s));
        free(sw);
        free(rw);
    }
    for (int i = 0; i < n; i++)
        d->got_rank[i] = -1;
    for (int q = 0; q < P; q++)
        if ((rc = exchange_unpack(&plan, q, me, d->len, d->npred, d->recvbuf[q], put_got, d, err))) {
            exchange_plan_free(&plan);
            return rc;
        }
    exchange_plan_free(&plan);
    /* 5. each local virtual rank's micro-batch, longest first */
    g_sort_dp = d;
    for (int v = 0; v < K; v++) {
        int g = me * K + v, m = 0;
        for (int k = d->res.start[g]; k < d->res.start[g + 1]; k++) {
            int i = d->res.seq[k];
            if (d->got_rank[i] != v)
                return unpad_fail(err, UNPAD_EINVAL, NULL, 0,
                                  "sample %d assigned to virtual rank %d did not arrive", i, g);
            d->order[m++] = i;
        }
        qsort(d->order, (size_t)m, sizeof *d->order, longest_first);
        d->count[v] = m;
        if ((rc = fill_micro(d, d->order, m, &mb[v], err)))
            return rc;
    }
    return UNPAD_OK;
}
