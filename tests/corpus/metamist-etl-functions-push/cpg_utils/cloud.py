def read_secret(project_id: str, secret_name: str, fail_gracefully: bool = True):
    """Stand-in for cpg_utils.cloud.read_secret, which reads Secret Manager while the program runs
    (impossible offline): a placeholder value."""
    return f'DROPPED-secret-{secret_name}'
