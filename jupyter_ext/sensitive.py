"""What must never leave this machine or be shown: the secrets deny-list and masking, in one place.

- Build contexts never copy a file or folder that `is_secret_path` names (keys, cloud and tool
  credentials, `.env` files, `.git`) or whose content `is_key_json` recognises as a Google
  credential; the generated `.dockerignore` lists the same patterns (`dockerignore_patterns`).
- A password or token inside a URL (`https://user:token@host/...`) is masked as `***` by
  `mask_urls` wherever it is shown; `url_credentials` finds one, so packaging can refuse it
  before it reaches an image.
- A job body as shown (`mask_job`, on any job body at any depth: a CustomJob, its jobSpec,
  CLUSTER_SPEC's and TF_CONFIG's `job`) has its `env` values as `***` and every URL in its strings
  (command, args, package URIs) masked by `mask_urls`; replicas still get the real values.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import PurePosixPath
from typing import Any

MASK = "***"

# Names of files or folders (any part of a path) that are never copied; matched case-insensitively.
SECRET_NAMES = (
    ".env", ".env.*", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",  # keys, certificates
    "*.p8", "*.ppk", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".ssh", ".gnupg",  # private keys
    ".git", ".git-credentials", ".netrc", ".pypirc", ".npmrc", ".boto", ".dockercfg",  # tools' credentials
    ".pgpass", ".s3cfg", ".vault-token",
)
# Credentials whose file names alone are too common to refuse: consecutive path parts, anywhere.
SECRET_PATHS = (".aws/credentials", ".docker/config.json", ".kube/config", ".config/gcloud")
# Names that often hold a Google credential; .json files are also checked by content (is_key_json).
KEY_JSON_NAMES = ("*service-account*.json", "*service_account*.json", "*credentials*.json", "client_secret*.json")
# Google credential files by their "type" (google-auth's kinds): keys, refresh tokens, workload identity
# federation and impersonation configs.
CREDENTIAL_TYPES = ("service_account", "authorized_user", "external_account", "external_account_authorized_user",
                    "impersonated_service_account", "gdch_service_account")
# Keys that hold a secret, at the top of a credential file or in an OAuth client's ("installed" or "web").
SECRET_KEYS = ("private_key", "refresh_token", "client_secret")
# A .json file without one of these words is not read as JSON (data files can be large).
_KEY_MARKERS = (*(key.encode() for key in SECRET_KEYS), b"external_account")

# scheme://userinfo@ : the userinfo ends at the last @ before the host's end (/, ?, # or a space), as
# urllib and pip split it, so an @ in a password is masked too
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]+)@")


def is_secret_path(path: PurePosixPath | str) -> bool:
    """True when any part of the relative `path` is a secret's name, or it holds a secret path."""
    parts = [part.lower() for part in PurePosixPath(path).parts]
    if any(fnmatch.fnmatchcase(part, pattern) for part in parts for pattern in SECRET_NAMES + KEY_JSON_NAMES):
        return True
    for secret in SECRET_PATHS:
        want = secret.split("/")
        if any(parts[i:i + len(want)] == want for i in range(len(parts) - len(want) + 1)):
            return True
    return False


def is_key_json(data: bytes) -> bool:
    """Google credentials: a file of one of the CREDENTIAL_TYPES, or one holding SECRET_KEYS (an OAuth
    client secret among them)."""
    if not any(marker in data for marker in _KEY_MARKERS):
        return False
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: nested too deep to read
        return True  # unreadable, but names a key: keep it out
    if not isinstance(doc, dict):
        return False
    parts = [doc, *(doc[kind] for kind in ("installed", "web") if isinstance(doc.get(kind), dict))]
    return doc.get("type") in CREDENTIAL_TYPES or any(key in part for part in parts for key in SECRET_KEYS)


def dockerignore_patterns() -> list[str]:
    return [f"**/{pattern}" for pattern in SECRET_NAMES + SECRET_PATHS + KEY_JSON_NAMES]


def url_credentials(text: str) -> bool:
    """True when a URL in `text` carries a password or token: `user:secret@`, or any userinfo of an
    http(s) URL (a token given as the user name). `git+ssh://git@host` names a user, not a secret."""
    for match in _USERINFO.finditer(text):
        if ":" in match["userinfo"] or "http" in match["scheme"].lower():
            return True
    return False


def mask_urls(text: str) -> str:
    """`text` with the userinfo of every URL that carries credentials replaced by ***."""
    def mask(match: re.Match[str]) -> str:
        return f"{match['scheme']}{MASK}@" if url_credentials(match[0]) else match[0]

    return _USERINFO.sub(mask, text)


def mask_job(data: Any) -> Any:
    """A copy of a job body as shown (any format, at any depth): its `env` variables all have the value ***,
    and its other strings (command, args, package URIs) have their URLs' credentials masked (`mask_urls`).
    ("Show env values" shows the job as it is.)"""
    if isinstance(data, dict):
        return {key: _masked_variables(value) if key == "env" and isinstance(value, list) else mask_job(value)
                for key, value in data.items()}
    if isinstance(data, list):
        return [mask_job(item) for item in data]
    if isinstance(data, str):
        return mask_urls(data)
    return data


def _masked_variables(variables: list[Any]) -> list[Any]:
    return [{**var, "value": MASK} if isinstance(var, dict) and "value" in var else mask_job(var) for var in variables]
