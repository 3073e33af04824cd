"""Microsoft Entra ID logins: which identity asks azure-identity for an access token (connection/entra.py
gets it and hands it to ODBC Driver 18 before connecting). Only Driver 18 takes a token; FreeTDS and
Driver 17 are refused at config time.

Kinds, as azure-identity names its credentials:
- `managed_identity`: the Azure resource's identity; `client_id` picks a user-assigned one.
- `workload_identity`: Kubernetes federated credentials; `tenant_id`, `client_id` and `token_file` default
  to what Azure's webhook puts in the pod (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_FEDERATED_TOKEN_FILE).
- `service_principal`: an app registration with a client secret (in a file, never in the config) or a
  certificate (a PEM file with its private key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .fields import PathText, Strict

# Azure SQL's resource; a token for it is what SQL Server on Azure checks.
SQL_SCOPE = "https://database.windows.net/.default"
EntraKind = Literal["managed_identity", "workload_identity", "service_principal"]
# Tenant and client ids are GUIDs (a tenant may also be given by its domain name).
Identifier = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]*$")]


class EntraSettings(Strict):
    kind: EntraKind
    tenant_id: Identifier | None = None
    client_id: Identifier | None = None
    # workload_identity: the federated token file (default AZURE_FEDERATED_TOKEN_FILE).
    token_file: PathText | None = None
    # service_principal: one of these.
    client_secret_file: PathText | None = None
    certificate_file: PathText | None = None
    # Another cloud's login endpoint (https only), e.g. https://login.microsoftonline.us.
    authority_host: Annotated[str, Field(pattern=r"^https://[^\s/?#]+/?$")] | None = None
    scope: Annotated[str, Field(pattern=r"^https://\S+$")] = SQL_SCOPE
    # A token is replaced this long before it expires, so no login presents one about to lapse.
    refresh_before_seconds: Annotated[float, Field(ge=0, le=3000)] = 300.0

    @field_validator("token_file", "client_secret_file", "certificate_file")
    @classmethod
    def _absolute(cls, path: str | None, info: ValidationInfo) -> str | None:
        # Relative paths follow the config file, as the password file's do; read at each token request.
        if path is None:
            return None
        base = Path((info.context or {}).get("base_dir", "."))
        return str((base / path).absolute())

    @model_validator(mode="after")
    def _fields_of_kind(self) -> Self:
        own = {
            "managed_identity": {"client_id"},
            "workload_identity": {"tenant_id", "client_id", "token_file"},
            "service_principal": {"tenant_id", "client_id", "client_secret_file", "certificate_file"},
        }[self.kind]
        kind_fields = {"tenant_id", "client_id", "token_file", "client_secret_file", "certificate_file"}
        stray = sorted(f for f in kind_fields - own if getattr(self, f) is not None)
        if stray:
            raise PydanticCustomError(
                "entra", "{kind} does not use {fields}", {"kind": self.kind, "fields": ", ".join(stray)}
            )
        if self.kind == "service_principal":
            if self.tenant_id is None or self.client_id is None:
                raise PydanticCustomError("entra", "service_principal needs tenant_id and client_id")
            if (self.client_secret_file is None) == (self.certificate_file is None):
                raise PydanticCustomError(
                    "entra", "service_principal needs exactly one of client_secret_file or certificate_file"
                )
        return self

    def identity(self) -> str:
        """Who logs in, for messages (no secret: ids are not secrets)."""
        who = self.kind.replace("_", " ")
        if self.client_id:
            who += f" {self.client_id}"
        if self.tenant_id:
            who += f" (tenant {self.tenant_id})"
        return who
