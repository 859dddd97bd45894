"""The demo fleet's data, not logic: the models and their envelopes, accelerator costs, regions, pools
and failover reserves, tenants, their grants and the demo logins. demo/fleet.py loads them.
"""

from __future__ import annotations

from dataclasses import dataclass

ACTOR = "demo-operator"
PASSWORD = "demo"


@dataclass(frozen=True)
class DemoModel:
    name: str
    r_wt_per_s: float  # R: chosen so one replica of the demo pool is a few to tens of CU
    layers: int
    kv_heads: int
    head_dim: int
    context_length: int
    weights_gb: float  # bf16 unless noted
    kv_bytes_override: int | None = None

    @property
    def kv_bytes_per_token(self) -> int:
        # K and V, 2 bytes each (bf16), every layer: layers × kv_heads × head_dim × 2 × 2.
        return self.kv_bytes_override or self.layers * self.kv_heads * self.head_dim * 2 * 2


MODELS: dict[str, DemoModel] = {
    "llama-2-70b": DemoModel("Llama 2 70B Chat", 5000, 80, 8, 128, 4096, 138),
    "llama-3-8b": DemoModel("Llama 3 8B Instruct", 5000, 32, 8, 128, 8192, 16.1),
    "llama-3.1-8b": DemoModel("Llama 3.1 8B Instruct", 20000, 32, 8, 128, 131072, 16.1),
    "llama-3.1-70b": DemoModel("Llama 3.1 70B Instruct", 5000, 80, 8, 128, 131072, 141),
    "llama-3.3-70b": DemoModel("Llama 3.3 70B Instruct", 5000, 80, 8, 128, 131072, 141),
    "llama-3.1-405b": DemoModel("Llama 3.1 405B Instruct", 1000, 126, 8, 128, 131072, 812),
    "mixtral-8x7b": DemoModel("Mixtral 8x7B Instruct", 10000, 32, 8, 128, 32768, 93.4),
    # MLA caches one compressed latent per layer: (kv_lora_rank 512 + rope dim 64) × 2 bytes × 61 layers.
    # Weights are FP8 as released (671B parameters).
    "deepseek-r1": DemoModel("DeepSeek R1", 5000, 61, 1, 576, 163840, 671, kv_bytes_override=61 * 576 * 2),
}

# Illustrative costs per accelerator (per slice for TPUs): list-price assumptions for the cost
# model, not quotes. (purchase USD, watts, cloud on-demand USD/h, cloud reserved USD/h, lead weeks)
ACCELERATOR_COSTS: dict[str, tuple[float, float, float, float, int]] = {
    "h100-80gb": (30000, 700, 4.00, 2.50, 12),
    "h200-141gb": (35000, 700, 5.00, 3.20, 16),
    "b200-180gb": (45000, 1000, 7.00, 4.50, 26),
    "gb200-186gb": (60000, 1200, 9.00, 6.00, 36),
    "a100-80gb": (15000, 400, 2.00, 1.30, 8),
    "l40s-48gb": (9000, 350, 1.50, 1.00, 8),
    "mi300x-192gb": (17000, 750, 4.00, 2.60, 16),
    "mi325x-256gb": (22000, 1000, 5.00, 3.30, 20),
    "tpu-v5e-8": (0, 1600, 9.60, 6.00, 8),  # cloud only: 8 chips × $1.20/chip-hour
}

REGIONS = {"us-east": "US East", "eu-west": "EU West", "ap-south": "Asia Pacific South"}


@dataclass(frozen=True)
class PoolSpec:
    slug: str
    model: str
    region: str
    accelerator: str
    per_replica: int
    scenario: str  # operating point scenario prefix
    runtime: str  # operating point runtime substring
    replicas: tuple[int, ...]  # per zone a, b, c
    maintenance_pct: float = 5
    safety_pct: float = 5
    fragmentation_pct: float = 2
    failure_policy: str = "zone"


# The commitment the platform holds per pool (docs/contract.md §10): its $ per CU-hour reads data/prices.csv's row
# for this term; a pool the list has no row for keeps the catalogue's figure (entitlements.pool_price).
POOL_TERMS = {
    "llama-2-70b-us-east-h200": "1_year",
    "llama-2-70b-eu-west-h100": "1_year",
    "llama-3.1-8b-us-east-h100": "3_year",
}

POOLS = [
    PoolSpec("llama-2-70b-us-east-h200", "llama-2-70b", "us-east", "h200-141gb", 8, "Server", "Nebius", (3, 3, 2)),
    PoolSpec("llama-2-70b-us-east-b200", "llama-2-70b", "us-east", "b200-180gb", 8, "Server", "10.11", (1, 1, 1), 4),
    PoolSpec("llama-2-70b-eu-west-h100", "llama-2-70b", "eu-west", "h100-80gb", 8, "Server", "", (3, 3, 2)),
    PoolSpec("llama-3.1-8b-us-east-h100", "llama-3.1-8b", "us-east", "h100-80gb", 1, "Server", "", (6, 6, 6)),
    PoolSpec("llama-3.1-8b-eu-west-h200", "llama-3.1-8b", "eu-west", "h200-141gb", 8, "Server", "", (1, 1, 1)),
    PoolSpec("mixtral-8x7b-ap-south-h200", "mixtral-8x7b", "ap-south", "h200-141gb", 8, "Server", "HPE", (2, 1, 1)),
    PoolSpec("llama-3.1-405b-us-east-b200", "llama-3.1-405b", "us-east", "b200-180gb", 8, "Server", "", (1, 1)),
    PoolSpec("deepseek-r1-us-east-b200", "deepseek-r1", "us-east", "b200-180gb", 8, "Server", "", (1, 1, 1)),
    # No latency-bounded TPU point is published: this pool runs on a ceiling (safety margin raised).
    PoolSpec(
        "llama-3-8b-ap-south-tpu-v5e",
        "llama-3-8b",
        "ap-south",
        "tpu-v5e-8",
        1,
        "max throughput; batch=128",
        "",
        (2, 2, 2),
        5,
        15,
        4,
    ),
]

# (host pool, protected pool, protected zone or None for the whole pool, CU, note). A reserve
# re-lands traffic of its own model only, and a zone reserve is held on host replicas outside
# that zone (the B200 pool has replicas in us-east-a too: only its b and c replicas hold this).
RESERVES = [
    (
        "llama-2-70b-us-east-b200",
        "llama-2-70b-us-east-h200",
        "us-east-a",
        102,
        "covers the H200 pool's 3 replicas in us-east-a (≈ 102 CU) on B200 replicas in us-east-b and -c",
    ),
    (
        "llama-3.1-8b-us-east-h100",
        "llama-3.1-8b-eu-west-h200",
        None,
        8,
        "re-lands 8 CU of eu-west's 8B traffic in us-east if that pool fails",
    ),
]

TENANTS = {
    "acme": ("Acme Corp", ["support-bot", "search"]),
    "globex": ("Globex", ["analytics"]),
    "initech": ("Initech", ["codegen"]),
    "umbrella": ("Umbrella Research", ["research"]),
}


@dataclass(frozen=True)
class GrantSpec:
    tenant: str
    project: str | None
    pool: str
    traffic_class: str
    share: float  # of the pool's deliverable CU (best_effort: of physical, it is not sold)
    ends_after_days: int | None = None
    starts_in_days: int = -60
    overage: str = "throttle"
    # Borrowing limit as a share of the grant: best_effort only (docs/contract.md §5, only best_effort borrows).
    borrow_share: float = 0.0
    lending_share: float | None = None  # lending limit as a share of the grant: reserved/shared (docs/lending.md)
    weight: float | None = None  # best_effort fair-share weight (docs/lending.md)
    spill_to: tuple[str | None, str, str] | None = None  # (project, pool, class) of the same tenant's target
    spill_budget_cu: float | None = None  # docs/spillover.md
    # Offered this many times its own rate by the simulator (demo.simulator), so the live pages show it
    # spilling or borrowing: the rest of the fleet is offered under its rate and would do neither.
    overdrive: float = 0.0
    term: str = "on_demand"  # the tenant's commitment (docs/contract.md §10): priced at the list's row for it


GRANTS = [
    # Nearly full: 93 % of the H200 pool sold.
    GrantSpec("acme", "support-bot", "llama-2-70b-us-east-h200", "reserved", 0.40),
    GrantSpec("globex", "analytics", "llama-2-70b-us-east-h200", "shared", 0.30, ends_after_days=365),
    GrantSpec("initech", "codegen", "llama-2-70b-us-east-h200", "reserved", 0.23, term="1_year"),
    GrantSpec(
        "umbrella", "research", "llama-2-70b-us-east-h200", "best_effort", 0.05, overage="borrow", borrow_share=1
    ),
    GrantSpec("acme", "search", "llama-2-70b-us-east-b200", "shared", 0.35, ends_after_days=180),
    GrantSpec("umbrella", "research", "llama-2-70b-us-east-b200", "reserved", 0.30),
    GrantSpec("globex", "analytics", "llama-2-70b-eu-west-h100", "reserved", 0.50, term="1_year"),
    GrantSpec("acme", None, "llama-2-70b-eu-west-h100", "best_effort", 0.10, overage="borrow", borrow_share=1),
    # Spills: a small EU grant driven past its bucket overflows to the same project's US grant (docs/spillover.md).
    GrantSpec(
        "acme",
        "support-bot",
        "llama-2-70b-eu-west-h100",
        "reserved",
        0.01,
        spill_to=("support-bot", "llama-2-70b-us-east-h200", "reserved"),
        spill_budget_cu=1.0,
        overdrive=2.0,
    ),
    GrantSpec("acme", "search", "llama-3.1-8b-us-east-h100", "reserved", 0.60),
    GrantSpec("initech", "codegen", "llama-3.1-8b-us-east-h100", "shared", 0.25),
    # Lots of room: 15 % sold now, a second grant starts next month.
    GrantSpec("umbrella", "research", "llama-3.1-8b-eu-west-h200", "shared", 0.15),
    GrantSpec("globex", "analytics", "llama-3.1-8b-eu-west-h200", "reserved", 0.10, starts_in_days=30),
    GrantSpec("initech", "codegen", "mixtral-8x7b-ap-south-h200", "reserved", 0.45),
    GrantSpec("globex", "analytics", "mixtral-8x7b-ap-south-h200", "shared", 0.30, ends_after_days=90),
    GrantSpec("acme", "support-bot", "llama-3.1-405b-us-east-b200", "reserved", 0.55),
    GrantSpec("umbrella", "research", "llama-3.1-405b-us-east-b200", "reserved", 0.40, ends_after_days=120),
    GrantSpec("initech", "codegen", "deepseek-r1-us-east-b200", "reserved", 0.50),
    GrantSpec("acme", "search", "deepseek-r1-us-east-b200", "shared", 0.30),
    # Lending: globex lends at most a third of its grant; two borrowers share what is lent 1 : 3.
    GrantSpec("globex", "analytics", "llama-3-8b-ap-south-tpu-v5e", "shared", 0.40, lending_share=1 / 3),
    GrantSpec(
        "acme", None, "llama-3-8b-ap-south-tpu-v5e", "best_effort", 0.10, overage="borrow", borrow_share=1, weight=1
    ),
    GrantSpec(
        "umbrella",
        "research",
        "llama-3-8b-ap-south-tpu-v5e",
        "best_effort",
        0.03,
        overage="borrow",
        borrow_share=1,
        weight=3,
        overdrive=2.0,
    ),
    # A launch approved to start in 12 weeks: from then the pool is short after a zone failure, and the
    # TPU's 8-week lead time leaves 4 weeks to order, so the first screen has an order that arrives in
    # time (issue 48.7; every other gap of a fresh demo starts now and is late).
    GrantSpec("initech", "codegen", "llama-3-8b-ap-south-tpu-v5e", "reserved", 0.35, starts_in_days=84),
]

USERS = [
    # (username, platform role, (tenant, membership role), is_staff)
    ("demo-operator", "operator", None, True),
    ("demo-approver", "approver", None, False),
    ("demo-requester", None, ("acme", "requester"), False),
    ("demo-viewer", None, ("acme", "viewer"), False),
    ("demo-outsider", None, ("globex", "requester"), False),
    ("demo-gateway", "gateway", None, False),
]

# Typical request shapes per model: (max prompt, max output, prompt p50, p95, output p50, p95, concurrency)
ENVELOPES: dict[str, tuple[int, int, int, int, int, int, int]] = {
    "llama-2-70b": (3072, 1024, 300, 1500, 250, 800, 64),
    "llama-3-8b": (6144, 2048, 220, 1500, 190, 1000, 128),
    "llama-3.1-8b": (16000, 1024, 800, 4000, 70, 400, 256),
    "mixtral-8x7b": (8000, 2048, 150, 1500, 150, 1000, 128),
    "llama-3.1-405b": (32000, 2048, 9400, 20000, 680, 1600, 16),
    "deepseek-r1": (8000, 16000, 800, 3000, 3900, 12000, 32),
}


# Assumptions, not measurements: an operator replaces them with their own contracts. USD per
# accelerator-hour. Owned hardware pays its host share (CPU, memory, chassis, rack); a cloud
# instance price includes the host, so it carries only what the instance price leaves out.
OVERHEAD_BASIS = "demo assumption: host, network, storage and software figures are placeholders an operator sets"
OWNED_OVERHEADS = {
    "host_cost_per_hour": 0.35,
    "network_cost_per_hour": 0.08,
    "storage_cost_per_hour": 0.03,
    "software_cost_per_hour": 0.10,
    "overhead_basis": OVERHEAD_BASIS,
}
CLOUD_OVERHEADS = {
    "host_cost_per_hour": 0.0,
    "network_cost_per_hour": 0.05,
    "storage_cost_per_hour": 0.03,
    "software_cost_per_hour": 0.10,
    "overhead_basis": OVERHEAD_BASIS,
}
