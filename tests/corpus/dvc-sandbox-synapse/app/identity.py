# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/services/service_account.py
import pulumi_gcp as gcp

from bus import PROJECT

# an account made outside this stack, looked up by its id
runner = gcp.serviceaccount.Account.get(
    "runner-account",
    id=f"projects/{PROJECT}/serviceAccounts/cloud-run@vcmate.iam.gserviceaccount.com",
    account_id="cloud-run@vcmate.iam.gserviceaccount.com",
    display_name="runner of the Cloud Run service",
)
