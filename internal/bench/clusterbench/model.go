package clusterbench

import (
	"errors"
	"math"
)

// Costs are a node's CPU seconds per packet: delivered to an endpoint,
// taken from an endpoint (Ingress), sent to another node (BridgeOut: a
// copy into the batch of each node that takes it) and received from
// another node (BridgeIn).
type Costs struct {
	Delivered, Ingress, BridgeOut, BridgeIn float64
}

func (c Costs) vec() [4]float64 { return [4]float64{c.Delivered, c.Ingress, c.BridgeOut, c.BridgeIn} }

func rates(u NodeUse) [4]float64 { return [4]float64{u.Delivered, u.Ingress, u.BridgeOut, u.BridgeIn} }

// Predict is the CPU, in cores, the model gives a node doing u's work.
func (c Costs) Predict(u NodeUse) float64 {
	v, r := c.vec(), rates(u)
	var s float64
	for i := range v {
		s += v[i] * r[i]
	}
	return s
}

// Fit finds the costs that best explain the nodes' CPU from their packet
// rates (least squares, no cost below zero: a cost the data pushes below
// zero is set to zero and the rest fitted again). A rate no node had
// leaves its cost zero.
func Fit(us []NodeUse) (Costs, error) {
	var active [4]bool
	for _, u := range us {
		for i, r := range rates(u) {
			if r > 0 {
				active[i] = true
			}
		}
	}
	for range 4 {
		x, err := solve(us, active)
		if err != nil {
			return Costs{}, err
		}
		neg := false
		for i := range x {
			if active[i] && x[i] < 0 {
				active[i], neg = false, true
			}
		}
		if !neg {
			return Costs{Delivered: x[0], Ingress: x[1], BridgeOut: x[2], BridgeIn: x[3]}, nil
		}
	}
	return Costs{}, errors.New("clusterbench: no non-negative fit")
}

// solve is least squares over the active columns: the normal equations,
// by Gaussian elimination with partial pivoting.
func solve(us []NodeUse, active [4]bool) ([4]float64, error) {
	var cols []int
	for i, a := range active {
		if a {
			cols = append(cols, i)
		}
	}
	var x [4]float64
	k := len(cols)
	if k == 0 {
		return x, nil
	}
	if len(us) < k {
		return x, errors.New("clusterbench: fewer measured nodes than costs to fit")
	}
	// a is k×(k+1): AᵀA | Aᵀb, columns scaled to unit size so packet
	// rates of very different sizes condition alike.
	scale := make([]float64, k)
	for j, c := range cols {
		for _, u := range us {
			scale[j] = max(scale[j], rates(u)[c])
		}
	}
	a := make([][]float64, k)
	for i := range a {
		a[i] = make([]float64, k+1)
	}
	for _, u := range us {
		r := rates(u)
		for i, ci := range cols {
			vi := r[ci] / scale[i]
			for j, cj := range cols {
				a[i][j] += vi * r[cj] / scale[j]
			}
			a[i][k] += vi * u.CPU
		}
	}
	for col := range k {
		p := col
		for row := col + 1; row < k; row++ {
			if math.Abs(a[row][col]) > math.Abs(a[p][col]) {
				p = row
			}
		}
		if math.Abs(a[p][col]) < 1e-12 {
			return x, errors.New("clusterbench: the measured rates cannot tell the costs apart")
		}
		a[col], a[p] = a[p], a[col]
		for row := range k {
			if row == col {
				continue
			}
			f := a[row][col] / a[col][col]
			for j := col; j <= k; j++ {
				a[row][j] -= f * a[col][j]
			}
		}
	}
	for i, c := range cols {
		x[c] = a[i][k] / a[i][i] / scale[i]
	}
	return x, nil
}

// Scenario is the seeds' R sessions × M members × N institutions: each
// session has one speaker sending PPS packets a second and its members
// spread evenly over the institutions; each institution has at least one
// node, and a session's members at one institution sit on one node there
// (placement keeps a session together), so each session's stream crosses
// once to each other institution that has its members.
type Scenario struct {
	Sessions, Members, Institutions int
	PPS                             float64
}

// Users is R × M.
func (s Scenario) Users() int { return s.Sessions * s.Members }

// sessionCost is the CPU (cores) one session costs the cluster.
func (s Scenario) sessionCost(c Costs) float64 {
	far := float64(min(s.Institutions, s.Members) - 1) // institutions the stream crosses to
	cost := c.Ingress + float64(s.Members-1)*c.Delivered + far*(c.BridgeOut+c.BridgeIn)
	return cost * s.PPS
}

// Nodes is how many nodes of budget cores (what a node may use) the
// scenario needs: its CPU over the budget, and at least one node per
// institution.
func (s Scenario) Nodes(c Costs, budget float64) int {
	need := int(math.Ceil(float64(s.Sessions) * s.sessionCost(c) / budget))
	return max(need, s.Institutions)
}

// Scaling is what N nodes carry against N times one node, in the model:
// the same sessions spread over N institutions (one node each) against
// all of them on one node; 1 when spreading costs nothing.
func (s Scenario) Scaling(c Costs, n int) float64 {
	one := s
	one.Institutions = 1
	spread := s
	spread.Institutions = n
	cn := spread.sessionCost(c)
	if cn == 0 {
		return 0
	}
	return one.sessionCost(c) / cn
}
