"""Sampling LLM outputs through litellm, and the embedded local LLM.

::

    from dbpa.llm import sample
    from dbpa.specs import Message, ModelSpec

    outputs = sample(ModelSpec(model="local/smollm2-135m"), [Message(role="user", content="Hi")],
                     range(20), seed=0, on_outputs=store)

* :func:`sample` / :func:`sample_async` fill the given output indices of an arm; the same
  index gives the same text in a full and in a resumed run (see ``_sampler``'s docstring).
* :func:`choices_per_request`, :func:`requests_needed`, :func:`block_seed`: the blocking of
  indices into requests, for progress bars and checks.
* Errors: :class:`TransientModelError` (retries exhausted), :class:`PermanentModelError`
  (the arm stops at once), :class:`UnreachableModelError` (a permanent error: the endpoint
  refused connections, or could not be reached, for ``connect_budget_s``); all are
  :class:`ModelError` and never contain a key.
* ``local/...`` models (:data:`LOCAL_MODELS`) run in-process on xllamacpp; the server starts
  on first use and stops at exit or with :func:`stop_local_server`.
* :func:`stop_requests`: a signal ends the process; requests not yet sent are not sent
  (the arm raises :class:`SamplingStopped` once its requests in flight have delivered), so
  sampling threads return within one request instead of finishing their arms;
  :func:`allow_requests` undoes it once that run has ended, for a new run in the same
  process; :func:`stopping` says whether it is in force.
* Provider batches (``batch: true``; ``_batch``, ``_batch_api``): :func:`check_batchable`,
  :func:`batch_requests`, :func:`split`, :func:`submit`, :func:`poll`, :func:`collect`,
  :func:`cancel`, :func:`batch_prices` (OpenAI-format Files + Batches API through litellm).
* :func:`check_model_string`: what can be known of a model string without litellm (a
  provider prefix litellm does not know, a malformed string), against
  :data:`LITELLM_PROVIDERS` and :data:`LITELLM_ENDPOINT_HOSTS`.
* For other litellm callers (the hosted embedding backend): :func:`litellm`, the configured
  module; :func:`provider_name` and :func:`api_key` (:data:`KEYLESS_PLACEHOLDER` for keyless
  servers); :class:`Retrier`, the retry loop with the sampler's error policy, and
  :func:`endpoint_for`, what it shares with every caller of an endpoint (the connect
  budget's clock, a rejected key or model).

litellm is imported on first use only, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set before
(:func:`litellm`), so nothing here touches the internet.
"""

from ._batch import (
    BATCH_DISCOUNT,
    BATCH_PROVIDERS,
    BatchLimits,
    BatchRequest,
    BatchUnsupportedError,
    batch_prices,
    batch_requests,
    check_batchable,
    split,
)
from ._batch_api import BatchState, Collected, Submitted, cancel, collect, poll, submit
from ._client import litellm
from ._endpoints import endpoint_for
from ._errors import (
    ModelError,
    PermanentModelError,
    SamplingStopped,
    TransientModelError,
    UnreachableModelError,
)
from ._local import LOCAL_MODELS, LocalModel, LocalServer, local_server, stop_local_server
from ._model_strings import check_model_string
from ._provider_names import LITELLM_ENDPOINT_HOSTS, LITELLM_PROVIDERS
from ._providers import KEYLESS_PLACEHOLDER, api_key, choices_per_request, provider_name
from ._retry import DEFAULT_RETRY, Retrier, RetryPolicy
from ._runner import allow_requests, stop_requests, stopping
from ._sampler import OnOutputs, Warn, block_seed, requests_needed, sample, sample_async
from ._spend import (
    Prices,
    SpendCap,
    SpendCapReached,
    UnknownPriceError,
    model_prices,
    prompt_tokens_high,
)

__all__ = [
    "BATCH_DISCOUNT",
    "BATCH_PROVIDERS",
    "DEFAULT_RETRY",
    "KEYLESS_PLACEHOLDER",
    "LITELLM_ENDPOINT_HOSTS",
    "LITELLM_PROVIDERS",
    "LOCAL_MODELS",
    "BatchLimits",
    "BatchRequest",
    "BatchState",
    "BatchUnsupportedError",
    "Collected",
    "LocalModel",
    "LocalServer",
    "ModelError",
    "OnOutputs",
    "PermanentModelError",
    "Prices",
    "Retrier",
    "RetryPolicy",
    "SamplingStopped",
    "SpendCap",
    "SpendCapReached",
    "Submitted",
    "TransientModelError",
    "UnknownPriceError",
    "UnreachableModelError",
    "Warn",
    "allow_requests",
    "api_key",
    "batch_prices",
    "batch_requests",
    "block_seed",
    "cancel",
    "check_batchable",
    "check_model_string",
    "choices_per_request",
    "collect",
    "endpoint_for",
    "litellm",
    "local_server",
    "model_prices",
    "poll",
    "prompt_tokens_high",
    "provider_name",
    "requests_needed",
    "sample",
    "sample_async",
    "split",
    "stop_local_server",
    "stop_requests",
    "stopping",
    "submit",
]
