"""modules/helper of terraform-google-modules/terraform-google-iam (main.tf locals), in Python."""


def helper(bindings, mode, entities, conditional_bindings=()):
    authoritative = mode == "authoritative"
    additive = mode == "additive"
    singular = len(entities) == 1
    aliased_entities = ["default"] if singular else list(entities)
    real_entities = list(entities)

    def distinct(items):
        out = []
        for item in items:
            if item not in out:
                out.append(item)
        return out

    no_condition = {"title": "", "description": "", "expression": ""}
    bindings_by_role = distinct([
        {"name": name, "role": role, "members": members, "condition": no_condition}
        for name in real_entities for role, members in bindings.items()])
    bindings_by_conditions = distinct([
        {"name": name, "role": b["role"], "members": b["members"],
         "condition": {"title": b["title"], "description": b["description"], "expression": b["expression"]}}
        for name in real_entities for b in conditional_bindings])
    all_bindings = bindings_by_role + bindings_by_conditions
    bindings_by_member = distinct([
        {"name": b["name"], "role": b["role"], "member": member, "condition": b["condition"]}
        for b in all_bindings for member in b["members"]])

    keys_authoritative = distinct([f"{alias}--{role}" for alias in aliased_entities for role in bindings])
    keys_authoritative_conditional = distinct([
        f"{alias}--{b['role']}--{b['title']}" for alias in aliased_entities for b in conditional_bindings])
    keys_additive = distinct([
        f"{alias}--{role}--{member}" for alias in aliased_entities for role, members in bindings.items()
        for member in members])
    keys_additive_conditional = distinct([
        f"{alias}--{b['role']}--{b['title']}--{member}" for alias in aliased_entities
        for b in conditional_bindings for member in b["members"]])

    all_keys_authoritative = keys_authoritative + keys_authoritative_conditional
    all_keys_additive = keys_additive + keys_additive_conditional
    return {
        "bindings_authoritative": dict(zip(all_keys_authoritative, all_bindings)) if authoritative else {},
        "bindings_additive": dict(zip(all_keys_additive, bindings_by_member)) if additive else {},
        "set_authoritative": sorted(set(all_keys_authoritative)) if authoritative else [],
        "set_additive": sorted(set(all_keys_additive)) if additive else [],
    }
