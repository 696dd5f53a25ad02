/* net.c — the all-reduce and the sample exchange within and across nodes (net.h). */
#include "net.h"

#include <math.h>
#include <stdio.h>

static double log2_steps(int g)
{
    return g > 1 ? ceil(log2((double)g)) : 0;
}

static void shape(const hw_spec *hw, int gpus, net_cost *out)
{
    int p = hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;
    out->gpus = gpus;
    out->per_node = gpus < p ? gpus : p;
    out->nodes = (gpus + p - 1) / p;
    out->algo = gpus <= 1 ? NET_NONE : out->nodes == 1 ? NET_RING : NET_HIER;
    out->us = out->intra_us = out->inter_us = 0;
}

void net_allreduce(const hw_spec *hw, const calib_coef *c, double bytes, int gpus, net_cost *out)
{
    shape(hw, gpus, out);
    if (out->algo == NET_NONE)
        return;
    double link = hw->link_bw_gbs * 1e3 * c->comm_eff; /* bytes per microsecond */
    double node = hw->node_bw_gbs * 1e3 * c->comm_eff;
    int p = out->per_node, N = out->nodes;
    /* within the node: the ring's 2 (p-1)/p, as reduce-scatter + all-gather when hierarchical */
    out->intra_us = 2.0 * (p - 1) / p * bytes / link + log2_steps(p) * hw->link_lat_us;
    if (out->algo == NET_HIER)
        out->inter_us = 2.0 * (N - 1) / N * (bytes / p) / node + 2 * log2_steps(N) * hw->node_lat_us;
    out->us = out->intra_us + out->inter_us;
}

void net_exchange(const hw_spec *hw, const calib_coef *c, double bytes, int gpus, net_cost *out)
{
    shape(hw, gpus, out);
    if (out->algo == NET_NONE)
        return;
    double link = hw->link_bw_gbs * 1e3 * c->comm_eff, node = hw->node_bw_gbs * 1e3 * c->comm_eff;
    double G = gpus;
    out->intra_us = (out->per_node - 1) / G * bytes / link + hw->link_lat_us;
    if (out->algo == NET_HIER)
        out->inter_us = (G - out->per_node) / G * bytes / node + hw->node_lat_us;
    /* both directions of the all-to-all run at once: the slower one ends it */
    out->us = out->intra_us > out->inter_us ? out->intra_us : out->inter_us;
}

const char *net_algo_name(net_algo a)
{
    return a == NET_RING ? "ring" : a == NET_HIER ? "hier" : "none";
}

const char *net_algo_describe(const net_cost *nc, char *buf, size_t n)
{
    if (nc->algo == NET_NONE)
        snprintf(buf, n, "none (one GPU)");
    else if (nc->algo == NET_RING)
        snprintf(buf, n, "flat ring over %d GPUs (one node)", nc->gpus);
    else if (nc->gpus % nc->per_node) /* the last node partly filled: the full nodes set the time */
        snprintf(buf, n,
                 "hierarchical over %d nodes of up to %d GPUs (the last holds %d): reduce-scatter in the node, "
                 "all-reduce across nodes, all-gather in the node", nc->nodes, nc->per_node, nc->gpus % nc->per_node);
    else
        snprintf(buf, n,
                 "hierarchical over %d nodes x %d GPUs: reduce-scatter in the node, all-reduce "
                 "across nodes, all-gather in the node", nc->nodes, nc->per_node);
    return buf;
}
