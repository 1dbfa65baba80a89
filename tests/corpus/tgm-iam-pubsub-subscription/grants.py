# Written here after the shape of terraform-google-modules/terraform-google-iam modules/helper/main.tf
"""Expands "these principals get these roles on these targets" into one grant per principal."""
from itertools import product
from typing import Iterator, NamedTuple


class Grant(NamedTuple):
    target: str
    role: str
    principal: str

    @property
    def key(self) -> str:  # unique per grant; keeps the ':', '/' and '@' of role and principal
        return "--".join(self)


def one_per_principal(targets: list[str], roles: dict[str, list[str]]) -> Iterator[Grant]:
    for target, (role, principals) in product(targets, roles.items()):
        for principal in dict.fromkeys(principals):  # drop repeats, keep order
            yield Grant(target, role, principal)
