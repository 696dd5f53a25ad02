/* net.h — collectives across GPUs: the gradient all-reduce and the balanced sample exchange, within
 * one node and across nodes (hardware spec: gpus_per_node, link_* within a node, node_* across).
 *
 * All-reduce of B bytes over G GPUs (bandwidths are per GPU, times in microseconds; comm_eff is the
 * calibration's fraction of them):
 *   one node (G <= gpus_per_node): a flat ring,
 *       2 (G-1)/G x B / link_bw + ceil(log2 G) x link_lat;
 *   N = ceil(G / p) nodes of p GPUs: hierarchical (as NCCL's ring/tree over NVLink + IB):
 *       reduce-scatter within the node    (p-1)/p x B / link_bw
 *       all-reduce across nodes of B / p  2 (N-1)/N x (B/p) / node_bw + 2 ceil(log2 N) x node_lat
 *                                         (p rings in parallel, one per GPU and network port; the
 *                                         latency of a tree, which NCCL uses at scale)
 *       all-gather within the node        (p-1)/p x B / link_bw
 *       + ceil(log2 p) x link_lat.
 * Exchange (each GPU sends and receives about (G-1)/G of its samples' B bytes): within the node
 * (p-1)/G of them over the links, across nodes (G-p)/G over the network, both at once. */
#ifndef UNPAD_NET_H
#define UNPAD_NET_H

#include "calib.h"
#include "model.h"

typedef enum { NET_NONE, NET_RING, NET_HIER } net_algo;

typedef struct {
    net_algo algo;        /* NET_NONE on one GPU */
    int gpus, nodes, per_node;
    double us;            /* the whole collective */
    double intra_us;      /* of it: within the nodes */
    double inter_us;      /* of it: across nodes */
} net_cost;

/* All-reduce of `bytes` (the buffer, e.g. 4 x parameters for fp32 gradients) over `gpus` GPUs. */
void net_allreduce(const hw_spec *hw, const calib_coef *c, double bytes, int gpus, net_cost *out);
/* Balanced sample exchange: `bytes` is one GPU's batch as moved (ids, predictions, records). */
void net_exchange(const hw_spec *hw, const calib_coef *c, double bytes, int gpus, net_cost *out);

/* "flat ring over 8 GPUs (one node)", "hierarchical: 64 nodes x 8 GPUs (reduce-scatter in the
 * node, all-reduce across nodes, all-gather in the node)", "none (one GPU)". */
const char *net_algo_describe(const net_cost *nc, char *buf, size_t n);
/* "ring", "hier", "none": the CSV column. */
const char *net_algo_name(net_algo a);

#endif
