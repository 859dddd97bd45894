from entitlements.models.access import RoleChange
from entitlements.models.catalogue import Accelerator, OperatingPoint, Region, ServedModel, Zone
from entitlements.models.grants import (
    Entitlement,
    EntitlementHistory,
    HistoryContext,
    ReasonCode,
    TrafficClass,
)
from entitlements.models.prices import Price, PriceChange, Term
from entitlements.models.supply import FailoverReserve, Pool, PoolZone
from entitlements.models.tenancy import ApiToken, Membership, PlatformRole, Project, Tenant, UsdBudgetChange

__all__ = [
    "Accelerator",
    "ApiToken",
    "Entitlement",
    "EntitlementHistory",
    "FailoverReserve",
    "HistoryContext",
    "Membership",
    "OperatingPoint",
    "PlatformRole",
    "Pool",
    "PoolZone",
    "Price",
    "PriceChange",
    "Project",
    "ReasonCode",
    "Region",
    "RoleChange",
    "ServedModel",
    "Tenant",
    "Term",
    "TrafficClass",
    "UsdBudgetChange",
    "Zone",
]
