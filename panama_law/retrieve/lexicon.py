"""A bridge from everyday (Panamanian and general Latin-American) Spanish to the words the law is written in.

Two tables, one bridge. The Constitution's (`_TABLE`, below) maps callers' words to the Constitution's own
vocabulary. The everyday-law table (`data/everyday_lexicon.txt`, see `data/EVERYDAY_LEXICON.md`) does the same for
the matters callers ask about most and the Constitution barely touches (work, leases, neighbours, animals, family,
inheritance, consumers, utilities, schools, traffic, street trade, health, water, environment, police, permits and
procedure), in the words Panamanian codes, laws and municipal rules use: it serves the norms a team imports, whose
text this package never sees. It was written from general knowledge, domain by domain, without seeing any imported
law or question set. The Constitution's table expands every question; the everyday table's terms are added for
the norms without callers' glosses only (`search.Searcher`), since a norm with glosses already holds its callers'
wordings and more terms only compete with them. On the four development laws (122 questions, no glosses) the
everyday table took recall@3 from 82 to 87 of 122 and MRR@10 from 0.587 to 0.620; the Constitution alone is
untouched, and its development questions on the indexes that hold one of those laws found 943 of 993 in the first
three against 945 (out of scope abstained 397 of 570 both times). Added for every norm instead, it
gave 86 of 122, took a glossed development law from 29 to 27 of 30, and moved the Constitution's abstain signal
enough to need a refit.

Callers speak of "botar", "la plata" or "la cana"; the text says "despedido", "salario" and "privado de su
libertad". Neither the stemmer nor a general-purpose embedding crosses that gap reliably, so the query is expanded
with the formal terms, which are appended (with a lower weight) and never replace what was said.

How the Constitution's table was built, so that its coverage does not depend on any particular set of
questions: it walks the Constitution Título by Título (and Capítulo by Capítulo), lists the concepts each one
regulates, and for each concept the everyday words, slang and short phrasings people use for it, mapped to the
words the articles themselves use. Rules the table keeps:

* every expansion term occurs in the Constitution (checked by a test); a term the text never uses only adds noise;
* a key is a word or short phrase with its common inflections written out (matching is on folded words, not
  stems, because sound-alike stems collide: "votar"/"botar", "casa"/"casado");
* entries are general vocabulary for a concept, never a paraphrase of one question.

The everyday table keeps the second and third rules; its terms are the codes' words, so no text here can check
them. Each entry of either table is `variant, variant, … = formal terms` (indented lines continue the entry above);
keys are folded (lowercase, no accents, ñ as n) when parsed.
"""

from __future__ import annotations

from importlib import resources

from ..text import fold, words

_TABLE = """
# ---- Título I: el Estado, territorio, idioma, símbolos, división política -------------------------------------
pais, paisito = nación estado república
suelo, pedazo, tierra nacional, islas, isla = territorio
soberania, independencia = soberano independiente
idioma, lengua, hablar espanol, espanol, ingles = idioma oficial español
bandera, himno, escudo, simbolos patrios = símbolos nación himno bandera escudo
provincias, provincia = provincias distritos corregimientos
democracia, democratico = democrático republicano representativo
tratado, tratados, derecho internacional = tratados derecho internacional

# ---- Título II: nacionalidad y extranjería -----------------------------------------------------------------
panameno, panamenos, panamena = panameños nacionalidad
nacionalidad, ciudadania = nacionalidad panameña
volverme panameno, hacerme panameno, nacionalizarme, naturalizarme, naturalizarse, nacionalizarse, naturalizado,
    naturalizada, nacionalizado = naturalización carta naturaleza nacionalidad
naci, nacio, nace, nacer, nacido, nacida, nacidos = nacimiento nacidos territorio
extranjero, extranjera, extranjeros, gringo, gringos, venezolano, venezolana, colombiano, colombiana, nicaraguense,
    chino, inmigrante, inmigrantes, migrante, migrantes = extranjeros nacionales
migracion, inmigracion, indocumentado, indocumentados = inmigración migración extranjeros
residencia, residente, vivir aca, vivir aqui = residencia domicilio
adoptado, adoptada, adoptar, adopcion = adoptados
doble nacionalidad, perder la nacionalidad, renunciar a la nacionalidad = nacionalidad renuncia pierde

# ---- Título III cap. 1: garantías fundamentales ------------------------------------------------------------
racismo, racista, negro, negra, negros, indio, color de piel = raza discriminación
discriminar, discriminaron, discriminacion, discriminado, discriminada = discriminación fueros privilegios
gay, homosexual, lesbiana, mujer, mujeres, hombre, hombres = sexo discriminación
discapacitado, discapacitada, discapacidad, silla de ruedas = discapacidad
pobre, pobres, rico, ricos = clase social
detener, detuvieron, detenido, detenida, arrestar, arrestaron, arresto, arrestado, agarraron, encerrar,
    encerrado, encerrada, encerraron, preso, presa, presos, meter preso, cana, calabozo, celda
    = detenido detención privado libertad
sin orden, orden de captura, orden de arresto = mandamiento escrito autoridad competente
habeas corpus = hábeas corpus libertad detenido
carcel, carceles, penitenciaria, reos, reo, prision = sistema penitenciario detenidos rehabilitación
extraditar, extraditado, extradicion, mandar a otro pais, entregar a otro pais = extraditar nacionales
declarar contra, confesar, testificar, testigo, autoincriminarme = declarar contra sí mismo cónyuge parientes
casa, hogar, vivienda propia, allanar, allanamiento, allanaron, meterse, se meta, entrar a mi casa,
        = domicilio residencia inviolables entrar
viajar, moverme, mudarme, mudarse, salir del pais = transitar libremente domicilio residencia
carta, cartas, correo, celular, telefono, llamadas, whatsapp, mensajes, chat, chats, pinchar, chuzar, grabar,
        = correspondencia documentos privados comunicaciones
espiar, espionaje, interceptar = correspondencia comunicaciones interceptadas
pena de muerte, matar, fusilar, ejecutar, ejecucion = pena muerte
destierro, exilio, exiliar, desterrar = expatriación
quitar todo, confiscar, confiscacion, decomiso = confiscación bienes
retroactivo, retroactividad, no era delito, ley nueva = retroactivo ley anterior punibles
dos veces, mismo delito = juzgado una vez misma causa
religion, religiones, iglesia, iglesias, culto, cultos, evangelico, evangelicos, catolico, catolicos, creyente,
    ateo, pastor, cura, curas, sacerdote, padre de la iglesia, monja = religión cultos religiosos
opinar, opinion, decir lo que pienso, criticar, critica, hablar mal, expresarme, expresion, libertad de expresion,
    publicar, redes sociales, periodista, periodistas, periodico, prensa, noticias,
        = pensamiento palabra escrito censura previa
censura, censurar, callar = censura previa
protesta, protestar, protestas, marcha, marchar, marchas, manifestacion, manifestarse, piquete, tranque, cierre de
    calle = reunirse pacíficamente manifestaciones reuniones
asociacion, asociaciones, fundacion, fundaciones, club, ong = asociaciones fundaciones personas jurídicas
profesion, oficio, ejercer mi profesion, idoneidad = profesión oficio idoneidad
quejarme, quejarse, queja, quejas, reclamo, reclamar, reclamar al gobierno, solicitud, solicitudes, no me contestan,
    no me responden, contestar, responder, respuesta = peticiones quejas pronta resolución
datos, mis datos, datos personales, base de datos, informacion personal, habeas data,
        = información personal bases datos hábeas data
transparencia, informacion publica = información acceso público
amparo, recurso de amparo, orden arbitraria, abuso de autoridad = amparo garantías orden revocada
emergencia, estado de emergencia, toque de queda, guerra, pandemia = estado urgencia guerra perturbación orden público

# ---- Título III cap. 1: propiedad, consumidores, impuestos, autores ----------------------------------------
terreno, terrenos, lote, lotes, finca, fincas, propiedad, propiedades, dueno, duena = propiedad privada
expropiar, expropiacion, expropiaron, quitar el terreno, quitar la casa, quitar el lote,
        = expropiación utilidad pública indemnización
consumidor, consumidores, cliente, clientes, tienda, tiendas, producto, productos, compre, compra, comprar,
    garantia, defectuoso, danado, vino malo, estafa, estafaron, publicidad enganosa,
        = consumidor bienes servicios calidad información veraz
impuesto, impuestos, tributo, tributos, tasa, tasas = impuesto contribución
derechos de autor, autor, autores, inventor, invento, patente, cancion, canciones, pirateria, obra,
        = autor artista inventor propiedad exclusiva obra

# ---- Título III cap. 2: familia -------------------------------------------------------------------------------
matrimonio, casarse, casarme, casado, casada, casados, boda, me case, se caso = matrimonio cónyuges
esposo, esposa, marido, mujer de uno, conyuge = cónyuges matrimonio
divorcio, divorciarme, divorciarse, separarme, separarse = matrimonio disuelto
arrejuntado, arrejuntada, arrejuntados, juntado, juntada, juntados, concubino, concubina, concubinato, vivir juntos,
    convivir, union libre, pareja = unión hecho matrimonio
hijo, hija, hijos, hijas, pelao, pelaos, pelada, pelado, chiquillo, chiquillos, chiquilla, nino, ninos, nina, ninas,
    bebe, menor, menores, chamaco, chamacos = hijos menores padres
custodia, tutela, patria potestad, criar, crianza = patria potestad padres hijos
pension alimenticia, pension, manutencion, alimentos, no da plata para los hijos = alimentar alimentos hijos
paternidad, reconocer al hijo, no lo reconoce, apellido, prueba de adn = paternidad filiación
fuera del matrimonio, hijo natural, hijos naturales, bastardo = hijos habidos fuera matrimonio iguales
abuelos, abuelo, abuela, viejitos, ancianos, tercera edad, adultos mayores = ancianos
familia, familias = familia

# ---- Título III cap. 3: trabajo -----------------------------------------------------------------------------
trabajo, trabajar, chamba, chambear, camello, camellar, empleo, chambita = trabajo trabajador empleo
desempleo, desempleado, sin trabajo = pleno empleo trabajo
jefe, jefes, patron, patrono, empleador, empresa, empresas, companias = empleador empresa trabajadores
empleado, empleados, trabajador, trabajadores, obrero, obreros = trabajadores trabajador
sueldo, sueldos, salario, quincena, paga, pago, pagar, pagan, pagaron, cobrar, cobro = salario sueldo remuneración
salario minimo, minimo, aumento, aumento de sueldo = salario mínimo ajustar periódicamente
lo mismo, igual trabajo, mismo trabajo, menos que = trabajo igual salario distinción
sindicato, sindicatos, sindical, gremio, gremios, sindicalizarse = sindicación sindicales
huelga, huelgas, paro, paros = huelga
horas, horas extra, horas extras, jornada, turno, turnos, de noche, nocturno = jornada máxima horas extraordinarias
descanso, vacaciones, feriado, domingo, domingos = descanso semanal vacaciones
embarazada, embarazadas, embarazo, preñada, gravida, parir, parto, dar a luz, licencia de maternidad, fuero de
    maternidad, lactancia = gravidez maternidad parto
botar, botaron, boto, bote, botan, correr, corrieron, corrio, echar, echaron, despedir, despidieron, despido,
    despedido, despedida, liquidacion, prestaciones, indemnizacion = despedido despido separada empleo
renunciar, renuncio, renuncie, firme, contrato de trabajo = renuncia convenio trabajo nulas
capacitacion, entrenamiento, curso = capacitación enseñanza profesional

# ---- Título III caps. 4-5: cultura y educación -----------------------------------------------------------------
cultura, arte, artistas, artista = cultura artística artistas
ruinas, monumento, monumentos, casco viejo, patrimonio historico, arqueologico,
        = patrimonio histórico monumentos arqueológicos
deporte, deportes, deportistas = cultura física deportivas
folclore, tradiciones, pollera, tamborito = tradiciones folclóricas
lenguas indigenas, dialecto, dialectos = lenguas aborígenes
television, radio, tele, medios, propaganda = medios comunicación social
escuela, escuelas, colegio, colegios, liceo, educacion, estudiar, estudios, clases, matricula, escuelita,
        = educación enseñanza escuelas
escuela publica, colegio publico, escuela del gobierno = educación oficial escuelas públicas gratuita
gratis, gratuito, gratuita = gratuita gratuito
escuela privada, colegio privado, escuelas privadas = centros docentes particulares
maestro, maestra, maestros, profesor, profesora, profesores, docente, docentes = educadores docentes
estudiante, estudiantes, alumno, alumnos = estudiantes educando
beca, becas = becas estudiantes
universidad, universidades, la u, universitario = universidad oficial autónoma
titulo, titulos, diploma, revalidar = títulos académicos profesionales
catecismo, clase de religion, rezar, misa = religión católica escuelas públicas cultos

# ---- Título III caps. 6-8: salud, seguridad social, vivienda, ambiente, agro -------------------------------------
hospital, hospitales, medico, medicos, doctor, doctores, clinica, centro de salud, enfermo, enfermedad, vacuna,
    vacunas = salud población
medicina, medicinas, medicamento, pastillas, remedios = medicamentos
seguro social, la caja, css, jubilacion, jubilado, jubilada, jubilarme, pension de vejez, vejez, incapacidad,
        = seguridad social jubilaciones
vivienda, casa propia, techo, apartamento = vivienda
agua potable, comida, hambre, alimentacion = alimentación salud
ambiente, medio ambiente, contaminacion, contaminar, contaminada, basura, humo, ecologia,
        = ambiente contaminación ecológico
arboles, tala, talar, deforestacion, bosque, bosques, animales, fauna = bosques fauna
rio, rios, lago, agua, aguas = aguas ríos
mina, minas, mineria, minera, oro, cobre = recursos naturales renovables subsuelo
campesino, campesinos, agricultor, agricultores, campo, cultivos, ganado, productores, agro,
        = campesinos agropecuario agraria tierras
indigena, indigenas, comarca, comarcas, guna, ngabe, embera = indígenas comunidades
defensor del pueblo, defensoria, derechos humanos = defensoría pueblo derechos humanos

# ---- Título IV: ciudadanía, sufragio, partidos, Tribunal Electoral --------------------------------------------
ciudadano, ciudadanos, mayor de edad, mayoria de edad, dieciocho = ciudadanos dieciocho años
votar, voto, votos, votacion, votaciones, sufragio, elecciones, eleccion, elegir, urnas = sufragio voto elecciones
secreto, secreta = voto secreto
partido, partidos, partido politico = partidos políticos
candidato, candidata, candidatos, candidatura, lanzarse, postularse, independiente, libre postulacion,
        = candidatos postulación elección popular
campana, campana politica, proselitismo, politiqueria, apoyar al candidato = candidatos elección popular apoyo oficial
comprar votos, compra de votos, fraude = sufragio libertad honradez
tribunal electoral = tribunal electoral
cedula, registro civil, acta de nacimiento, certificado de nacimiento, defuncion, defunciones, muertes, nacimientos,
        = inscripciones nacimientos defunciones cédula identidad

# ---- Título V: Asamblea Nacional y formación de las leyes --------------------------------------------------------
asamblea, diputado, diputados, diputada, hd, honorable diputado, legislador, legisladores, congreso,
        = asamblea nacional diputados
ley, leyes, proyecto de ley = ley proyecto asamblea
aprobar una ley, pasar una ley, hacer una ley, debate, debates = proyecto ley debates aprobado
vetar, veto, no quiere firmar, objetar = objeciones ejecutivo proyecto
inmunidad, fuero = investigados procesados corte suprema

# ---- Título VI: Presidente, Ministros, Gabinete ----------------------------------------------------------------
presidente, presi, mandatario, primer mandatario, presidencia, presidencial = presidente república
vicepresidente, vice = vicepresidente
reelegir, reelegirse, reeleccion, reelecto, volver a ser presidente, segundo periodo = reelegidos períodos
ministro, ministros, ministra, gabinete, ministerio = ministros estado gabinete
sueldo del presidente, cuanto gana = emolumentos
se muere, muere, murio, renuncia, falta = falta absoluta
gira, viaje, viajes, salir del pais = ausentarse territorio licencia
hermano, hermana, primo, prima, tio, tia, sobrino, cunado, cunada, suegro, pariente, parientes, familiares,
    familiar, nepotismo = parientes consanguinidad afinidad

# ---- Título VII: administración de justicia y Ministerio Público --------------------------------------------------
justicia, tribunales, tribunal, juzgado, juzgados, juez, jueces, magistrado, magistrados,
        = justicia juzgados tribunales jueces magistrados
corte, corte suprema = corte suprema justicia
demanda, demandar, demande, poner una demanda, juicio, proceso, pleito = proceso justicia juzgados
costas, gastos del juicio, cobran, papel sellado = gratuita papel simple impuesto
abogado, abogados, defensor de oficio, abogado de oficio, defensa = defensa jurídica asesoramiento
jurado, jurados = jurados
fiscal, fiscales, fiscalia, procurador, procuraduria, personero, personeros, ministerio publico,
        = ministerio público procurador fiscales
inconstitucional, inconstitucionalidad = inconstitucionalidad corte suprema

# ---- Título VIII: representantes, municipios, provincias -------------------------------------------------------
representante, representantes, corregimiento, corregimientos = representante corregimiento
junta comunal, juntas comunales = junta comunal
municipio, municipios, municipal, alcaldia, alcaldias, alcalde, alcaldes, concejo, concejal, concejales, distrito,
        = municipio municipal concejo alcalde distrito
impuesto municipal, impuestos municipales, permiso de la alcaldia = impuestos municipales ingreso municipal
referendum, consulta popular, plebiscito = referéndum iniciativa
gobernador, gobernadora, provincia = gobernador provincia

# ---- Título IX: bienes del Estado, moneda, presupuesto, Contraloría ----------------------------------------------
playa, playas, costa, mar, orilla = playas riberas mar uso público
bienes del estado, propiedad del estado = pertenecen estado bienes
concesion, concesiones = concesiones explotación
plata, dinero, billete, billetes, moneda, monedas, balboa, dolar, dolares, imprimir plata = moneda emitir fondos
banco, bancos, banco nacional = bancos oficiales
presupuesto, gasto, gastos, gastar, gasto publico = presupuesto gastos egresos
deuda, deudas, prestamo, prestamos, empréstito = deuda empréstitos
contraloria, contralor, auditoria, fiscalizar = contraloría general fiscalizar cuentas
peculado, se robo la plata, robar, robo, robaron, roba, malversacion, corrupcion, corrupto, coima, coimas, soborno,
        = manejo fondos cuentas delito

# ---- Título X: economía nacional ----------------------------------------------------------------------------
negocio, negocios, comercio, comerciante, abarroteria, abarrotes, minisuper, kiosko, al por menor = comercio por menor
al por mayor, mayorista = comercio por mayor
monopolio, monopolios, competencia, precios, acaparar = monopolio libre competencia
cooperativa, cooperativas = cooperativas
frontera, fronteras, comprar tierra = adquirir propiedad tierras extranjeras
caza, cazar, pesca, pescar = caza pesca
casino, casinos, loteria, chance, apuestas, apostar, juegos de azar, bingo, rifa = juegos suerte azar apuestas
guaro, trago, tragos, licor, cerveza, alcohol, cantina, cantinas, bar, bares = expendio bebidas alcohólicas

# ---- Título XI: servidores públicos ---------------------------------------------------------------------------
funcionario, funcionarios, empleado publico, empleados publicos, trabajar en el gobierno, burocrata, botella,
    botellas = servidores públicos
dos sueldos, doble sueldo, dos puestos = dos sueldos servidores públicos
declaracion jurada, declarar sus bienes, mostrar sus bienes, patrimonio = declaración jurada estado patrimonial
carrera administrativa, concurso, meritos = carrera administrativa méritos
contrato con el estado, licitacion, licitaciones = contratos licitación

# ---- Título XII: Fuerza Pública -------------------------------------------------------------------------------
ejercito, militar, militares, soldado, soldados, servicio militar, defender el pais = ejército armas defender
policia, policias, polis, tombos, agente, agentes = policía fuerza pública
arma, armas, pistola, pistolas, fusil = armas elementos guerra

# ---- Título XIII: reforma de la Constitución ----------------------------------------------------------------
constitucion, carta magna = constitución
cambiar la constitucion, reformar la constitucion, reforma constitucional, reformas = reformas constitucionales
nueva constitucion, otra constitucion, constituyente = constituyente nueva constitución

# ---- Título XIV: el Canal ----------------------------------------------------------------------------------
canal, canal de panama = canal panamá
acp, autoridad del canal = autoridad canal panamá
ampliar, ampliacion, tercer juego de esclusas, esclusas = esclusas construcción canal
peaje, peajes, barcos, buques = peajes naves
"""


def _plain(tokens: list[str]) -> list[str]:
    """Keys and queries meet without ñ as well: "panameño" is often typed (or transcribed) as "panameno"."""
    return [t.replace("ñ", "n") for t in tokens]


def _parse(table: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines: list[str] = []
    for raw in table.splitlines():
        if raw.startswith("    ") and lines:  # an indented line continues the entry above
            lines[-1] += " " + raw.strip()
        elif raw.strip() and not raw.startswith("#"):
            lines.append(raw.strip())
    for line in lines:
        keys, _, expansion = line.partition("=")
        target = expansion.strip()
        for key in keys.split(","):
            folded = " ".join(_plain(words(key)))
            if folded:
                # The same everyday word can name several concepts ("casa": home / own house): keep them all.
                out[folded] = f"{out[folded]} {target}" if folded in out else target
    return out


class Lexicon:
    """One table of `variant, … = formal terms` entries, and the expansion of a question by it."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table
        self._max_phrase = max((len(key.split()) for key in table), default=0)

    def expand(self, query: str) -> str:
        """Return the formal terms this table adds for `query` (empty when none apply).

        Longer phrases win: a word already covered by a matched phrase does not also add its single-word entry.
        """
        tokens = _plain(words(query))
        covered = [False] * len(tokens)
        added: list[str] = []
        for size in range(self._max_phrase, 0, -1):
            for start in range(len(tokens) - size + 1):
                if any(covered[start : start + size]):
                    continue
                extra = self.table.get(" ".join(tokens[start : start + size]))
                if extra is not None:
                    added.append(extra)
                    covered[start : start + size] = [True] * size
        return " ".join(added)

    def formal_terms(self) -> set[str]:
        """Every word the table expands to, folded (for the Constitution table's corpus-coverage check)."""
        return {w for target in self.table.values() for w in words(fold(target))}


CONSTITUTION = Lexicon(_parse(_TABLE))
EVERYDAY = Lexicon(
    _parse(resources.files("panama_law").joinpath("data", "everyday_lexicon.txt").read_text(encoding="utf-8"))
)
