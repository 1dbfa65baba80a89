import os

import pulumi


def archive_folder(path: str, allowed_extensions=frozenset({'.py', '.txt', '.json'}), extra_assets=None):
    """Stand-in: the folder's files with an allowed extension as an AssetArchive (plus extra_assets)."""
    assets = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            if os.path.splitext(name)[1] in allowed_extensions:
                full = os.path.join(root, name)
                assets[os.path.relpath(full, path)] = pulumi.FileAsset(full)
    assets.update(extra_assets or {})
    return pulumi.AssetArchive(assets)
