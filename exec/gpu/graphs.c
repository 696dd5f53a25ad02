/* graphs.c — a micro-batch's forward and backward as one CUDA graph (graphs.h). */
#include <stdlib.h>

#include <cuda.h>

#include "gpu/graphs.h"
#include "unpad.h"

typedef struct {
    uint64_t sig;      /* the topology: node count, edge count, node types in capture order */
    cudaGraphExec_t x; /* NULL: free */
    unsigned long used;
} graph_slot;

struct step_graphs {
    int K;
    cudaStream_t cs;   /* the capture stream: nothing ever runs on it */
    graph_slot *slots; /* [2][K][STEP_GRAPHS_KEEP] */
    unsigned long tick;
    step_graphs_stats st;
};

step_graphs *step_graphs_create(int K, unpad_err *err)
{
    step_graphs *g = calloc(1, sizeof *g);
    if (g)
        g->slots = calloc((size_t)2 * K * STEP_GRAPHS_KEEP, sizeof *g->slots);
    if (!g || !g->slots) {
        free(g);
        unpad_fail(err, UNPAD_ENOMEM, NULL, 0, "out of host memory for the step graphs");
        return NULL;
    }
    g->K = K;
    cudaCheck(cudaStreamCreateWithFlags(&g->cs, cudaStreamNonBlocking));
    return g;
}

void step_graphs_free(step_graphs *g)
{
    if (!g)
        return;
    for (int i = 0; i < 2 * g->K * STEP_GRAPHS_KEEP; i++)
        if (g->slots[i].x)
            cudaGraphExecDestroy(g->slots[i].x);
    free(g->slots);
    if (g->cs)
        cudaStreamDestroy(g->cs);
    free(g);
}

/* The driver's cuGraphKernelNodeGetParams: it describes every kernel node, those a library
 * launched through the driver included (the runtime's cudaGraphKernelNodeGetParams refuses them as
 * invalid device functions). NULL where the driver has none. */
typedef CUresult (*kernel_params_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
static kernel_params_fn kernel_params(void)
{
    static int tried;
    static kernel_params_fn fn;
    if (!tried) {
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult q;
        tried = 1;
        if (cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess && q == cudaDriverEntryPointSuccess)
            fn = (kernel_params_fn)p;
        else
            cudaGetLastError();
    }
    return fn;
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++, v >>= 8)
        h = (h ^ (v & 0xff)) * 0x100000001b3ull;
    return h;
}

/* The signature a kept executable graph must share with gr to be updated from it: the node count,
 * the edge count, and in capture order each node's kind and, for a kernel, its function and
 * cluster shape (so an update changes only grids, blocks, shared memory and arguments; kernels of
 * other GEMM algorithms make another topology). A signature that matches and still differs makes the update
 * fail, and the caller instantiates instead. */
static uint64_t topology(cudaGraph_t gr, long *nodes)
{
    size_t n = 0, e = 0;
    cudaCheck(cudaGraphGetNodes(gr, NULL, &n));
    cudaCheck(cudaGraphGetEdges(gr, NULL, NULL, NULL, &e));
    uint64_t h = fnv(fnv(0xcbf29ce484222325ull, n), e);
    cudaGraphNode_t *nd = n ? malloc(n * sizeof *nd) : NULL;
    const kernel_params_fn get = kernel_params();
    if (nd) {
        cudaCheck(cudaGraphGetNodes(gr, nd, &n));
        for (size_t i = 0; i < n; i++) {
            enum cudaGraphNodeType ty;
            cudaCheck(cudaGraphNodeGetType(nd[i], &ty));
            h = fnv(h, (uint64_t)ty);
            if (ty != cudaGraphNodeTypeKernel)
                continue;
            /* the kernel's function (or library kernel); without the driver's entry point a kernel
             * counts by its kind alone, and the update checks it */
            CUDA_KERNEL_NODE_PARAMS kp;
            cudaKernelNodeAttrValue cl;
            if (get && get((CUgraphNode)nd[i], &kp) == CUDA_SUCCESS)
                h = fnv(fnv(h, (uint64_t)(uintptr_t)kp.func), (uint64_t)(uintptr_t)kp.kern);
            if (cudaGraphKernelNodeGetAttribute(nd[i], cudaLaunchAttributeClusterDimension, &cl) == cudaSuccess)
                h = fnv(h, cl.clusterDim.x | (uint64_t)cl.clusterDim.y << 21 | (uint64_t)cl.clusterDim.z << 42);
            else
                cudaGetLastError();
        }
        free(nd);
    } else if (n) {
        h = fnv(h, (uint64_t)(uintptr_t)gr); /* out of host memory: a signature nothing matches */
    }
    *nodes = (long)n;
    return h;
}

cudaGraphExec_t step_graphs_capture(step_graphs *g, bert *b, int parity, int v, uint64_t dseed, float mlm_scale,
                                    float nsp_scale, int accumulate)
{
    double t0 = unpad_now_s();
    cudaGraph_t gr = NULL;
    cudaCheck(cudaStreamBeginCapture(g->cs, cudaStreamCaptureModeThreadLocal));
    bert_forward(b, dseed, g->cs);
    bert_backward(b, mlm_scale, nsp_scale, accumulate, g->cs);
    cudaCheck(cudaStreamEndCapture(g->cs, &gr));
    long nodes = 0;
    uint64_t sig = topology(gr, &nodes);
    graph_slot *row = g->slots + ((size_t)(parity & 1) * g->K + v) * STEP_GRAPHS_KEEP;
    graph_slot *use = NULL;
    for (int i = 0; i < STEP_GRAPHS_KEEP && !use; i++)
        if (row[i].x && row[i].sig == sig)
            use = &row[i];
    if (use) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(use->x, gr, &info) == cudaSuccess) {
            g->st.updates++;
        } else { /* the topology differs after all: instantiated below, in this slot */
            cudaGetLastError();
            cudaCheck(cudaGraphExecDestroy(use->x));
            use->x = NULL;
            g->st.update_refused++;
        }
    } else { /* a free slot, else the one used longest ago */
        use = &row[0];
        for (int i = 0; i < STEP_GRAPHS_KEEP; i++) {
            if (!row[i].x) {
                use = &row[i];
                break;
            }
            if (row[i].used < use->used)
                use = &row[i];
        }
        if (use->x)
            cudaCheck(cudaGraphExecDestroy(use->x));
        use->x = NULL;
    }
    if (!use->x) {
        cudaCheck(cudaGraphInstantiate(&use->x, gr, 0));
        g->st.instantiations++;
    }
    use->sig = sig;
    use->used = ++g->tick;
    cudaCheck(cudaGraphDestroy(gr));
    g->st.captures++;
    g->st.nodes = nodes;
    g->st.host_s += unpad_now_s() - t0;
    return use->x;
}

void step_graphs_stats_get(const step_graphs *g, step_graphs_stats *st) { *st = g->st; }
