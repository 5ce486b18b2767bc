import type { AgentMode } from './labels';

/**
 * What happens to the person's voice and questions, in Spanish, shown on the start screen: the microphone
 * only opens when they press «Empezar», so they read this first.
 *
 * Where the voice goes depends on the mode: the page service says which this site runs in (GET /api/config)
 * before a session starts, and an agent that has joined says it in `lexvoz.mode` (the attribute the rehearsal
 * banner reads), which wins, since a worker may be configured apart from the service. The caller passes the
 * best it knows (`mode`); when neither has said, the notice names both without claiming either.
 */
export const VOICE_DESTINATION: Record<AgentMode | 'unknown', string> = {
  live: 'Su voz y lo que escriba se envían a OpenAI para transcribirlos y responder.',
  rehearsal:
    'Este sitio está en modo de ensayo: su voz y lo que escriba van a un simulador local en este servidor, ' +
    'no a OpenAI.',
  unknown:
    'Su voz y lo que escriba se envían al modelo de voz de este sitio para transcribirlos y responder: OpenAI, ' +
    'o un simulador local en este servidor si el sitio está en modo de ensayo (la página lo indica con un ' +
    'aviso en cuanto se conecta el agente).',
};

export function PrivacyNotice({ mode }: { mode?: AgentMode | undefined }) {
  return (
    <section className="privacy-notice" data-testid="privacy-notice" data-mode={mode ?? 'unknown'} aria-label="Privacidad">
      <p>
        Al pulsar «Empezar» se abre su micrófono. <span data-testid="privacy-voice">{VOICE_DESTINATION[mode ?? 'unknown']}</span>
      </p>
      <p>
        Las búsquedas que haga el asistente se envían al servicio de búsqueda jurídica configurado por quien opera
        este sitio. No diga datos personales que no necesite compartir.
      </p>
    </section>
  );
}
