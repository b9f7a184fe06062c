package kernels

import "github.com/puremetal/puremetal/gdn/spec"

// MatMulFile is the source of the dense matrix products: matvec, matmul
// and the gathered matvec of stacked experts.
const MatMulFile = "matmul.metal"

// The geometry of the matrix-product kernels (the MV_ and MM_ macros of
// matmul.metal, which say why).
const (
	// MatVecMaxRows is the most rows of x one matvec dispatch takes: it
	// reads each weight once for all of them.
	MatVecMaxRows = 8
	// MatVecSIMDGroups is the number of SIMD-groups of a matvec
	// threadgroup, (32, MatVecSIMDGroups, 1) threads.
	MatVecSIMDGroups = 4
	// MatVecTileRows is the number of rows of W a matvec threadgroup
	// computes: MatVecSIMDGroups SIMD-groups of 4 rows.
	MatVecTileRows = 4 * MatVecSIMDGroups
	// MatMulTileRows and MatMulTileCols are the rows of x and of W (the
	// columns of y) of one matmul threadgroup's tile of y.
	MatMulTileRows = 64
	MatMulTileCols = 64
	// MatMulThreads is the number of threads of a matmul threadgroup.
	MatMulThreads = 128
)

// MatVecOf returns the name of the matvec kernel for weight type w and
// activation type a: matvec_{w}_{a}.
func MatVecOf(w, a spec.ElemType) string { return matvecNames.name(w, a) }

// MatMulOf returns the name of the tiled matmul kernel for weight type w
// and activation type a: matmul_{w}_{a}.
func MatMulOf(w, a spec.ElemType) string { return matmulNames.name(w, a) }

// GatherMatVecOf returns the name of the gathered matvec kernel of stacked
// experts for weight type w and activation type a: gather_matvec_{w}_{a}.
func GatherMatVecOf(w, a spec.ElemType) string { return gatherMatVecNames.name(w, a) }

var (
	matvecNames       = newTypedNames("matvec", 2)
	matmulNames       = newTypedNames("matmul", 2)
	gatherMatVecNames = newTypedNames("gather_matvec", 2)
)
