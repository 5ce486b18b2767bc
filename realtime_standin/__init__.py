"""A local stand-in for the OpenAI Realtime API (GA protocol), for tests and rehearsal mode.

The OpenAI cloud cannot be reached from test machines; this server speaks the same WebSocket
protocol so the real livekit-agents OpenAI plugin runs unmodified against it via ``base_url``.
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
