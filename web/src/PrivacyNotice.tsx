import type { AgentMode } from './labels';

/**
 * What happens to the person's voice and questions, in Spanish, shown on the start screen: the microphone
 * only opens when they press «Empezar», so they read this first.
 *
 * Where the voice goes depends on the agent's mode, and only the agent says which (`lexvoz.mode`, the same
 * attribute the rehearsal banner reads), once it has joined a session. So the notice names the one place
 * the voice goes when an agent of this page has said so (`mode`), and before that names both without
 * claiming either. The page service does not tell the page its mode before a session starts.
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
