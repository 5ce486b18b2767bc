"""A local stand-in for the OpenAI Realtime API (GA protocol), for tests and rehearsal mode.

The OpenAI cloud cannot be reached from test machines; this server speaks the same WebSocket
protocol so the real livekit-agents OpenAI plugin runs unmodified against it via ``base_url``.

The package owns the whole stand-in, and nothing of the product imports it except as a program
or a test fixture:

- the wire shapes of the protocol (:mod:`.protocol`, one builder per server event);
- one connection's behaviour: dispatch and session config (:mod:`.session`), conversation items
  (:mod:`.conversation_items`, :mod:`.conversation`), input audio and turn detection
  (:mod:`.input_audio`, :mod:`.vad`), responses and their streaming (:mod:`.responses`,
  :mod:`.tone`), on shared state (:mod:`.connection_state`, :mod:`.options`);
- what the scripted "model" says and "hears" (:mod:`.policy`);
- the server around it: the test handle and lifecycle (:mod:`.server`), the WebSocket endpoint
  (:mod:`.endpoint`), the record of the wire (:mod:`.event_log`), when turns ended and answers
  went out (:mod:`.timings`, for latency benchmarks), both kept bounded (:mod:`.event_record`),
  the HTTP control routes (:mod:`.control_api`) and the command line (``python -m realtime_standin``).
"""

from .policy import (
    GREETING,
    LegalResearchPolicy,
    PolicyContext,
    ResponsePolicy,
    ScriptedCall,
    ScriptedTranscripts,
    TranscriptProvider,
    render_sources,
)
from .server import RealtimeStandIn
from .vad import EnergyVad, VadEvent

__all__ = [
    "GREETING",
    "EnergyVad",
    "LegalResearchPolicy",
    "PolicyContext",
    "RealtimeStandIn",
    "ResponsePolicy",
    "ScriptedCall",
    "ScriptedTranscripts",
    "TranscriptProvider",
    "VadEvent",
    "render_sources",
]
