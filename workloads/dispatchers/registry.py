"""The token dispatchers by name: the values of ``layout.token_dispatcher``. A new dispatcher is a module in
this package and one line here."""

from __future__ import annotations

from workloads.dispatchers.allgather import AllgatherDispatcher
from workloads.dispatchers.alltoall import AlltoallDispatcher
from workloads.dispatchers.base import TokenDispatcher
from workloads.dispatchers.flex_deepep import FlexDeepepDispatcher
from workloads.dispatchers.flex_hybridep import FlexHybridepDispatcher
from workloads.dispatchers.megascale import MegaScaleDispatcher

DISPATCHERS: dict[str, TokenDispatcher] = {
    dispatcher.name: dispatcher
    for dispatcher in (
        MegaScaleDispatcher(),
        AlltoallDispatcher(),
        AllgatherDispatcher(),
        FlexDeepepDispatcher(),
        FlexHybridepDispatcher(),
    )
}
