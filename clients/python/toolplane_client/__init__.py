"""Toolplane from Python over gRPC, on the stubs generated into gen/.

The stubs (``gen/toolplane/...``: protoc's Python generator and
``grpc_python_plugin``; ``gen/google/rpc/...``: Status and the error-detail
messages) are made by ``make generate`` from buf.gen.yaml and
buf.gen.googleapis.yaml and fit Debian's python3-protobuf 3.21 and
python3-grpcio 1.51 (clients/python/README.md). Never edit them by hand.

    import toolplane_client as tp
    c = tp.connect("127.0.0.1:7420", token="tp-demo-editor")
    thread = c.runtime.CreateThread(tp.runtime_service_pb2.CreateThreadRequest()).thread

Every call carries ``authorization: Bearer <token>`` and a deadline.
``details(err)`` decodes a failed call's google.rpc.Status details
(ErrorInfo, BadRequest, ...) from the ``grpc-status-details-bin`` trailer.
"""

import os
import sys

_GEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen")
if _GEN not in sys.path:
    # The generated modules import each other by proto package
    # (``from toolplane.type.v1 import type_pb2``), so gen/ is a path root.
    sys.path.insert(0, _GEN)

import grpc  # noqa: E402
from google.protobuf import json_format, struct_pb2  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from toolplane.authz.v1 import authz_service_pb2, authz_service_pb2_grpc  # noqa: E402
from toolplane.catalog.v1 import catalog_pb2, catalog_service_pb2, catalog_service_pb2_grpc  # noqa: E402
from toolplane.runtime.v1 import runtime_pb2, runtime_service_pb2, runtime_service_pb2_grpc  # noqa: E402
from toolplane.skills.v1 import skills_service_pb2, skills_service_pb2_grpc  # noqa: E402

__all__ = [
    "Client", "connect", "details", "status_from_json", "unpack", "to_struct", "from_struct",
    "authz_service_pb2", "catalog_pb2", "catalog_service_pb2", "runtime_pb2", "runtime_service_pb2",
    "skills_service_pb2", "error_details_pb2", "status_pb2",
]

_DETAIL_TYPES = {
    "type.googleapis.com/google.rpc.ErrorInfo": error_details_pb2.ErrorInfo,
    "type.googleapis.com/google.rpc.BadRequest": error_details_pb2.BadRequest,
    "type.googleapis.com/google.rpc.RetryInfo": error_details_pb2.RetryInfo,
    "type.googleapis.com/google.rpc.PreconditionFailure": error_details_pb2.PreconditionFailure,
    "type.googleapis.com/google.rpc.QuotaFailure": error_details_pb2.QuotaFailure,
    "type.googleapis.com/google.rpc.ResourceInfo": error_details_pb2.ResourceInfo,
    "type.googleapis.com/google.rpc.Help": error_details_pb2.Help,
    "type.googleapis.com/google.rpc.LocalizedMessage": error_details_pb2.LocalizedMessage,
    "type.googleapis.com/google.rpc.DebugInfo": error_details_pb2.DebugInfo,
}


class _Authed:
    """Wraps a stub so every method call carries the token and a deadline."""

    def __init__(self, stub, metadata, timeout):
        self._stub, self._metadata, self._timeout = stub, metadata, timeout

    def __getattr__(self, name):
        method = getattr(self._stub, name)

        def call(request, timeout=None, metadata=()):
            return method(request, timeout=timeout or self._timeout,
                          metadata=tuple(self._metadata) + tuple(metadata))

        return call


class Client:
    """The four services of one Toolplane endpoint, with one credential."""

    def __init__(self, channel, token=None, timeout=30.0):
        md = [("authorization", "Bearer " + token)] if token else []
        self.channel = channel
        self.catalog = _Authed(catalog_service_pb2_grpc.CatalogServiceStub(channel), md, timeout)
        self.authz = _Authed(authz_service_pb2_grpc.AuthzServiceStub(channel), md, timeout)
        self.skills = _Authed(skills_service_pb2_grpc.SkillsServiceStub(channel), md, timeout)
        self.runtime = _Authed(runtime_service_pb2_grpc.RuntimeServiceStub(channel), md, timeout)

    def close(self):
        self.channel.close()


def connect(addr, token=None, timeout=30.0):
    """A plaintext channel to addr (host:port); use grpc.secure_channel and
    Client(channel, token) for TLS."""
    return Client(grpc.insecure_channel(addr), token=token, timeout=timeout)


def details(err):
    """The decoded google.rpc.Status details of a failed call (a list of
    ErrorInfo, BadRequest, ... messages; unknown types stay Any)."""
    for key, value in (err.trailing_metadata() or ()):
        if key == "grpc-status-details-bin":
            return unpack(status_pb2.Status.FromString(value))
    return []


def status_from_json(body):
    """A google.rpc.Status from the REST gateway's JSON error body
    (``{"code", "message", "details"}``), details resolved to their messages."""
    st = status_pb2.Status()
    json_format.Parse(body, st, ignore_unknown_fields=False)
    return st


def unpack(st):
    """The detail messages of a google.rpc.Status (unknown types stay Any)."""
    out = []
    for any_msg in st.details:
        cls = _DETAIL_TYPES.get(any_msg.type_url)
        if cls is None:
            out.append(any_msg)
            continue
        msg = cls()
        any_msg.Unpack(msg)
        out.append(msg)
    return out


def to_struct(obj):
    """A google.protobuf.Struct from a dict."""
    s = struct_pb2.Struct()
    s.update(obj or {})
    return s


def from_struct(s):
    """A dict from a google.protobuf.Struct."""
    return json_format.MessageToDict(s)
