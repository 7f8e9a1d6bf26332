"""What must never leave this machine or be shown: the secrets deny-list and masking, in one place.

- Build contexts never copy a file or folder that `is_secret_path` names (keys, cloud and tool
  credentials, `.env` files, `.git`) or whose content `is_key_json` recognises as a Google
  credential; the generated `.dockerignore` lists the same patterns (`dockerignore_patterns`).
- A password or token inside a URL (`https://user:token@host/...`) is masked as `***` by
  `mask_urls` wherever it is shown; `url_credentials` finds one, so packaging can refuse it
  before it reaches an image.
- The values of a job's `env` are shown as `***` (`mask_env` on any job body, at any depth: a
  CustomJob, its jobSpec, CLUSTER_SPEC's and TF_CONFIG's `job`); replicas still get the real values.
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
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",  # keys and certificates
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".ssh",  # SSH keys
    ".git", ".git-credentials", ".netrc", ".pypirc", ".npmrc", ".boto", ".dockercfg",  # tools' credentials
)
# Credentials whose file names alone are too common to refuse: consecutive path parts, anywhere.
SECRET_PATHS = (".aws/credentials", ".docker/config.json", ".kube/config", ".config/gcloud")
# Names that often hold a service-account key; .json files are also checked by content (is_key_json).
KEY_JSON_NAMES = ("*service-account*.json", "*service_account*.json", "*credentials*.json")

# scheme://userinfo@ : what comes before the @ of a URL's host
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


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
    """Google credentials: a service-account key or a user's refresh token."""
    if b"private_key" not in data and b"refresh_token" not in data:
        return False
    try:
        doc = json.loads(data)
    except ValueError:
        return True  # unreadable, but names a key: keep it out
    return isinstance(doc, dict) and ("private_key" in doc or "refresh_token" in doc)


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


def mask_env(data: Any) -> Any:
    """A copy of a job body (any format, at any depth) whose `env` variables all have the value ***."""
    if isinstance(data, dict):
        return {key: _masked_variables(value) if key == "env" and isinstance(value, list) else mask_env(value)
                for key, value in data.items()}
    if isinstance(data, list):
        return [mask_env(item) for item in data]
    return data


def _masked_variables(variables: list[Any]) -> list[Any]:
    return [{**var, "value": MASK} if isinstance(var, dict) and "value" in var else mask_env(var) for var in variables]
