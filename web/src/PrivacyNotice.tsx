/**
 * What happens to the person's voice and questions, in Spanish, shown on the start screen: the microphone
 * only opens when they press «Empezar», so they read this first.
 */
export function PrivacyNotice() {
  return (
    <section className="privacy-notice" data-testid="privacy-notice" aria-label="Privacidad">
      <p>
        Al pulsar «Empezar» se abre su micrófono. Su voz y lo que escriba se envían a OpenAI para transcribirlos y
        responder (en modo de ensayo, a un simulador local en este servidor, no a OpenAI).
      </p>
      <p>
        Las búsquedas que haga el asistente se envían al servicio de búsqueda jurídica configurado por quien opera
        este sitio. No diga datos personales que no necesite compartir.
      </p>
    </section>
  );
}

