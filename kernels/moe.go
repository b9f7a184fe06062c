package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// MoEFile is the source of the MoE router and of the combination of the
// experts' outputs; RankFile, a header in front of it and of SampleFile,
// orders logits as torch.argmax does.
const (
	MoEFile  = "moe.metal"
	RankFile = "rank_common.metal"
)

// The MoE router's geometry (ROUTE_PER and ROUTE_TOKENS in moe.metal):
// one SIMD-group per token, each lane holding up to RoutePerLane experts'
// logits, so a router takes at most 32 * RoutePerLane experts;
// RouteTokens tokens per threadgroup.
const (
	RoutePerLane = 16
	RouteTokens  = 4
)

// MoERouteOf returns the name of the router kernel for logit type x:
// moe_route_{x}.
func MoERouteOf(x spec.ElemType) string { return moeRouteNames.name(x) }

// MoECombineOf returns the name of the kernel that sums the experts'
// outputs, weighted, and the gated shared expert's, for activation type x:
// moe_combine_{x}.
func MoECombineOf(x spec.ElemType) string { return moeCombineNames.name(x) }

var (
	moeRouteNames   = newTypedNames("moe_route", 1)
	moeCombineNames = newTypedNames("moe_combine", 1)
)
