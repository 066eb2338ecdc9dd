"""The equations of each agent, with the paper's equation numbers, for its generated page (read by
``docs/gen_pages.py``)."""

# The equations of each agent, with the paper's equation numbers (papers in ../shared/papers/).
# Keys are (name, family) or name for every family. Text in Markdown with Unicode math (the site
# renders offline, so no MathJax).
EQUATIONS: dict = {
    "esdp": """\
ESDP (esdp.md §3, Algorithms 1–2), per slot t:

* statistics of each channel e from the semi-bandit feedback: n_e(t) plays, v̂_e(t) sample mean
  (eqs. 8–9); σ̂²_e(t) = g(t) / (2 n_e(t)), +∞ when n_e(t) = 0 (eq. 10), with
  g(t) = ln t + 4 ln(ln t + 1) · max‖x‖₁ (eq. 11; default ln(t+1) + 4 ln(ln(t+1)+1)·α|E|);
* δ(t) = 1 / (ln(ln t + 1) + 1) (eq. 14), ξ(t) = ⌈max‖x‖₁ / δ(t)⌉ (eq. 18),
  Υ̂ = ⌈ξ(t) v̂(t)⌉ and Σ̂² = ⌈ξ(t)² σ̂²(t)⌉ (eqs. 16–17), S(t) = {0, 1, …, ξ(t)·max‖x‖₁} (eq. 19);
* P4(s, t) (eq. 20): x*(s, t) ∈ argmax Σ̂²ᵀx subject to the capacities (eq. 2), eq. 12 and
  Υ̂ᵀx ≥ s, for every s ∈ S(t), all by one dynamic program (Algorithm 2);
* s* ∈ argmax_{s∈S(t)} { s + √(Σ̂²ᵀ x*(s, t)) } (eq. 21), play x*(s*, t) with the channels of ports
  without a job set to 0 (Algorithm 1, lines 10–16).
""",
    "hauf": """\
HAUF / HSWF (esdp.md §4): ports with a job in descending Σ_{r∈R_l} v̂_(l,r) (historical mean
utilities), their channels selected in turn (within a port by descending v̂) until the capacity
constraint (eq. 2) cannot be satisfied. Readings as options: ``rank="channels"`` ranks channels by
their own v̂; ``untried="first"`` ranks untried channels first; ``skip_unfit`` fills first fit.
""",
    "lcf": """\
LCF (esdp.md §4): channels of ports with a job in ascending supply cost Σ_k f_k(a_k^e), selected in
turn until eq. 2 cannot be satisfied.
""",
    "lwtf": """\
LWTF (esdp.md §4): ports with a job in descending waiting time (slots since the port last got a
channel while it had a job), channels selected in turn until eq. 2 cannot be satisfied.
""",
    "ogasched": """\
OGASched (ogasched.md §3, Algorithm 1), per slot t with arrivals x(t):

* gradient (eq. 9): ∂q/∂y_(l,r)^k = x_l(t) ((f_r^k)'(y_(l,r)^k) − β_k) for k = k*, else
  x_l(t) (f_r^k)'(y_(l,r)^k), with k* = argmax_k β_k Σ_{r∈R_l} y_(l,r)^k (eq. 10);
* step and projection (eq. 11): y(t+1) = Π_Y(y(t) + η_t ∇q(x(t), y(t))), Π_Y the Euclidean
  projection onto {0 ≤ y ≤ a (eq. 3), Σ_{l∈L_r} y_(l,r)^k ≤ c_r^k (eq. 4)};
* step size: η_t = η₀ · decay^t (Table 1: η₀ = 25, decay = 0.9999) read in units of 1/8 of the
  problem's unit, so the step applied is η_t / 64 (``eta_units="eighth-device"``: there Table 1's
  η₀ is about eq. 26's step, which §4 says it tunes around; ``eta_units="problem"``: η_t as is), or,
  with ``lr="eq26"``, η_t = diam(Y) / (‖∇q(x(t), y(t))‖ √T) (eq. 26).
""",
    ("drf", "multiserver-allocation"): """\
DRF (ogasched.md §4): ports with a job in ascending dominant share
s_l = max_k a_l^k / Σ_{r∈R_l} c_r^k, each given what it requests while capacity lasts.
""",
    ("drf", "ringallreduce"): """\
DRF (gadget.md §VI baselines): jobs in ascending dominant share over GPUs and server-uplink
bandwidth, each with a fixed number of workers, placed by the env's greedy ring placement.
""",
    "fairness": """\
FAIRNESS (ogasched.md §4): each port l with a job gets the share a_l^k / Σ_{l'} a_{l'}^k of
every (r, k), the sum over the ports of L_r with a job (§4.1: "each non-empty port without bias";
``active_share=false``: over all of L_r).
""",
    "binpacking": """\
BINPACKING (ogasched.md §4, Kubernetes MostAllocated): servers with the highest utilisation after
placement first.
""",
    "spreading": """\
SPREADING (ogasched.md §4, Kubernetes LeastAllocated): servers with the lowest utilisation after
placement first.
""",
    "gadget": """\
GADGET (gadget.md §V): Algorithm 1 (temporal greedy) solves problem (10) each slot with
Algorithm 2 (LP-RS-MDE): bounds q_i from the continuous relaxation (constraints 2, 4, 11); ring
sizes κ_i = argmax_{κ∈Q_i: χ̄_iκ>0} π_iκ χ̄_iκ from the LP relaxation of problem (12), with
π_iκ = μ_i(ζ_i(z+κ)) − μ_i(ζ_i z); the embedding LP over mappings with GPU (eqs. 16, 18) and
bandwidth (eqs. 17, 19) capacities and Σ_k φ_i^k ≤ 1 (eq. 13); randomized rounding with u_b tries
(Alg. 2 lines 7–9), a try that overfills a resource discarded (``rounding_repair=true``: repaired
and re-offered, beyond Algorithm 2). The module docstring below gives every step and the choices made.
""",
    "fifo": """\
FIFO (gadget.md §VI baselines): jobs in arrival order, a fixed number of workers each, placed by
the env's greedy ring placement (one server if possible, else one rack, else across racks).
""",
    "las": """\
LAS (gadget.md §VI baselines, "LAS in Tiresias [15]"): Tiresias' discretised LAS — two queues split
at 10 worker-slots of attained service, served in order, FIFO within a queue — fixed sizes, greedy
ring placement. ``thresholds``: other queues; ``thresholds=continuous``: ascending attained service.
""",
    "srpt": """\
SRPT (a reference policy for P3, not a paper baseline): jobs by increasing remaining budget
B_i − z_i (worker-slots; eq. 11), ties by arrival, fixed sizes, greedy ring placement.
``row_value=c``: by decreasing (λ1 − μ_i(ζ_i z_i) + c) / (B_i − z_i), the utility left to gain plus the
worth c of the window row the job frees, per worker-slot it still needs.
""",
    "greedy": """\
Greedy (a reference policy for P3, not a paper baseline): every visible job at its full
size κ_i = min(N_i, budget left), ranked by its full-size increment π_iκi = μ_i(ζ_i(z_i + κ_i)) −
μ_i(ζ_i z_i) (the objective of problem (10)), descending, placed one pass in that order by the env's
greedy ring placement; a job that does not fit at full size waits.
""",
    "opm": """\
OPM (opm.md §V, Theorem 3), per slot t, for every visible job j and machine i:

* UCB estimate θ̂_i^t = min{1, θ̄_i^t + 2 rad(θ̄_i^t, n_i + 1)} (eqs. 66–67) with
  rad(ν, P) = √(γν/P) + γ/P (eq. 14);
* primal step y_j(t) = x_j(t−1) + α ∇_{x_j} L_{t−1}(x(t−1), λ(t)) (eq. 69) on the Lagrangian of
  eq. 68, then per machine the projection onto {z ≥ 0, Σ_j z_j ≤ 1} (P4, eqs. 70–71);
* randomized rounding with E[x̃_j^i(t)] = x_j^i(t) (eq. 72);
* dual update λ_j(t+1) = max{0, λ_j(t) + 2μ g_j(x_j(t)) − μ g_j(x_j(t−1))} (eq. 73).

Defaults are Theorem 3's: γ = ln(MT/δ), μ = √T/M, α = 1/(2√T), ε = 0.
""",
    "opm-noest": """\
OPM without machine estimations (opm.md §VI baseline): OPM (eqs. 68–73) with every θ̂_i equal to
``theta_const`` instead of the UCB estimate of eqs. 66–67.
""",
    "ops": """\
OPS (opm.md §IV, Algorithm 1), one job: UCB estimates θ̂^t (eqs. 12–14); dual update
λ(t) = max{0, λ(t−1) + 2μ g(x(t−1)) − μ g(x(t−2))} (eq. 20) with g(x) = Σ_i p_i x^i − (1−ε)B/T
(eq. 10); primal step x(t) = Π_[0,1]^M(x(t−1) + α(θ̂ f'(W/(t−1)) − λ p)) (eqs. 17–19);
independent rounding x̃^i ~ Bernoulli(x^i) (eq. 21). Defaults are Theorem 2's.
""",
    "fair": """\
Fair (opm.md §VI baseline): the machines are shared equally among the jobs with budget left.
""",
    "edf": """\
Deadline-aware (opm.md §VI baseline): jobs by earliest deadline d_j; each takes as many machines
as its remaining budget pays for.
""",
    "random": """\
Feasible random (not from a paper): the reference of the normalised score (random = 0, see
[Evaluation](../evaluation.md)). Each family has its own implementation below.
""",
}
