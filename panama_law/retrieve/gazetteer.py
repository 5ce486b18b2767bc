"""Places whose law is not Panama's: countries, their demonyms and capitals, the states of the United States and
foreign cities and regions that Panamanians travel to or come from, written in Spanish; and foreign institutions.

The cities and regions (`data/foreign_cities.txt`) and the institutions, documents and programs callers name
(`data/foreign_institutions.txt`: "el uscis", "la registraduría", "la green card") were written later, from general
knowledge, by a writer who saw no question set and no code, with everything Panama shares left out
(`data/FOREIGN_PLACES.md` lists what was left out and why).

This is general knowledge (the world's sovereign states as Spanish names them, their usual gentilicios, their
capitals, the fifty US states), written out as data by hand; it was not drawn from any question set. It serves
`scope.foreign_jurisdiction`, which tells a question about another country's law ("en Costa Rica ...", "la ley
colombiana ...") from a question about foreigners in Panama ("soy colombiano, ¿puedo votar?").

Left out on purpose, because the same words name Panamanian places or everyday things: Panamá itself, Colón,
Santiago, David, San Juan, La Paz ("la paz"), Santo Domingo, San José, Victoria. India's demonym "indio/india" is
left out (in Panama it names indigenous people, whom the Constitution speaks of); the country is kept as "la India".

Each line of `_COUNTRIES` is `name[/other name] | demonym forms | capital`; names are folded (lowercase, no
accents, ñ as n) when read.
"""

from __future__ import annotations

from pathlib import Path

from ..text import words

_COUNTRIES = """
costa rica | costarricense costarricenses tico tica ticos ticas |
colombia | colombiano colombiana colombianos colombianas | bogota
venezuela | venezolano venezolana venezolanos venezolanas | caracas
ecuador | ecuatoriano ecuatoriana ecuatorianos ecuatorianas | quito
peru | peruano peruana peruanos peruanas | lima
bolivia | boliviano boliviana bolivianos bolivianas | sucre
chile | chileno chilena chilenos chilenas |
argentina | argentino argentinos argentinas | buenos aires
uruguay | uruguayo uruguaya uruguayos uruguayas | montevideo
paraguay | paraguayo paraguaya paraguayos paraguayas | asuncion
brasil | brasileno brasilena brasilenos brasilenas brasilero brasilera | brasilia
mexico | mexicano mexicana mexicanos mexicanas | ciudad de mexico
guatemala | guatemalteco guatemalteca guatemaltecos guatemaltecas |
honduras | hondureno hondurena hondurenos hondurenas | tegucigalpa
el salvador | salvadoreno salvadorena salvadorenos salvadorenas | san salvador
nicaragua | nicaraguense nicaraguenses nica nicas | managua
belice | beliceno belicena belicenos belicenas | belmopan
cuba | cubano cubana cubanos cubanas | la habana
republica dominicana | dominicano dominicana dominicanos dominicanas |
haiti | haitiano haitiana haitianos haitianas | puerto principe
jamaica | jamaiquino jamaiquina jamaiquinos jamaiquinas | kingston
puerto rico | puertorriqueno puertorriquena puertorriquenos puertorriquenas boricua boricuas |
trinidad y tobago | trinitense trinitenses |
guyana | guyanes guyanesa guyaneses |
surinam | surinames surinamesa |
estados unidos/eeuu/usa/norteamerica | estadounidense estadounidenses norteamericano norteamericana gringo gringa
    gringos gringas | washington
canada | canadiense canadienses | ottawa
espana | espanol espanola espanoles espanolas | madrid
portugal | portugues portuguesa portugueses | lisboa
francia | frances francesa franceses francesas | paris
italia | italiano italiana italianos italianas | roma
alemania | aleman alemana alemanes alemanas | berlin
reino unido/inglaterra/gran bretana/escocia | britanico britanica britanicos ingleses inglesa escoces | londres
irlanda | irlandes irlandesa irlandeses | dublin
paises bajos/holanda | holandes holandesa holandeses neerlandes | amsterdam
belgica | belga belgas | bruselas
suiza | suizo suiza suizos suizas | berna
austria | austriaco austriaca austriacos | viena
suecia | sueco sueca suecos | estocolmo
noruega | noruego noruega noruegos | oslo
dinamarca | danes danesa daneses | copenhague
finlandia | finlandes finlandesa finlandeses | helsinki
islandia | islandes islandesa |
polonia | polaco polaca polacos | varsovia
rusia | ruso rusa rusos rusas | moscu
ucrania | ucraniano ucraniana ucranianos | kiev
grecia | griego griega griegos | atenas
turquia | turco turca turcos | ankara
rumania | rumano rumana rumanos | bucarest
hungria | hungaro hungara hungaros | budapest
republica checa | checo checa checos | praga
israel | israeli israelies | jerusalen tel aviv
palestina | palestino palestina palestinos |
libano | libanes libanesa libaneses | beirut
siria | sirio siria sirios | damasco
iran | irani iranies | teheran
irak | iraqui iraquies | bagdad
arabia saudita/arabia saudi | saudita sauditas saudi | riad
emiratos arabes/dubai | emirati |
egipto | egipcio egipcia egipcios | el cairo
marruecos | marroqui marroquies | rabat
sudafrica | sudafricano sudafricana sudafricanos |
nigeria | nigeriano nigeriana nigerianos |
china | chino chinos chinas | pekin beijing
taiwan | taiwanes taiwanesa |
japon | japones japonesa japoneses | tokio
corea del sur/corea | coreano coreana coreanos | seul
corea del norte | norcoreano norcoreana |
la india | hindu hindues | nueva delhi
pakistan | pakistani pakistanies | islamabad
filipinas | filipino filipina filipinos | manila
vietnam | vietnamita vietnamitas | hanoi
tailandia | tailandes tailandesa | bangkok
indonesia | indonesio indonesia indonesios | yakarta
australia | australiano australiana australianos | canberra sidney
nueva zelanda | neozelandes neozelandesa |
"""

# The fifty states of the United States, plus the foreign cities most often named in Panama (where relatives live,
# where people travel or shop) that are not capitals.
_OTHER_PLACES = """
alabama alaska arizona arkansas california colorado connecticut delaware florida georgia hawai idaho illinois
indiana iowa kansas kentucky luisiana maine maryland massachusetts michigan minnesota misisipi misuri montana
nebraska nevada nuevo hampshire nueva jersey nuevo mexico nueva york carolina del norte carolina del sur
dakota del norte dakota del sur ohio oklahoma oregon pensilvania rhode island tennessee texas utah vermont virginia
virginia occidental wisconsin wyoming
miami orlando houston los angeles chicago nueva orleans las vegas barcelona medellin cali barranquilla cartagena
toronto guadalajara monterrey cancun sao paulo rio de janeiro
"""


def _fold_phrase(text: str) -> str:
    return " ".join(w.replace("ñ", "n") for w in words(text))


def _read() -> tuple[frozenset[str], frozenset[str]]:
    places: set[str] = set()
    demonyms: set[str] = set()
    lines: list[str] = []
    for raw in _COUNTRIES.splitlines():
        if raw.startswith("    ") and lines:
            lines[-1] += " " + raw.strip()
        elif raw.strip():
            lines.append(raw.strip())
    for line in lines:
        names, forms, capitals = (part.strip() for part in line.split("|"))
        places.update(_fold_phrase(n) for n in names.split("/"))
        demonyms.update(_fold_phrase(d) for d in forms.split())
        places.update(_split_phrases(capitals))
    places.update(_split_phrases(_OTHER_PLACES))
    return frozenset(places), frozenset(demonyms)


_MULTIWORD = (
    "ciudad de mexico",
    "buenos aires",
    "la habana",
    "puerto principe",
    "san salvador",
    "el cairo",
    "tel aviv",
    "nueva delhi",
    "nuevo hampshire",
    "nueva jersey",
    "nuevo mexico",
    "nueva york",
    "carolina del norte",
    "carolina del sur",
    "dakota del norte",
    "dakota del sur",
    "rhode island",
    "virginia occidental",
    "los angeles",
    "nueva orleans",
    "las vegas",
    "sao paulo",
    "rio de janeiro",
)


def _split_phrases(text: str) -> list[str]:
    """Words of `text`, with the known multi-word names kept whole."""
    folded = _fold_phrase(text)
    for phrase in _MULTIWORD:
        folded = folded.replace(phrase, phrase.replace(" ", "_"))
    return [w.replace("_", " ") for w in folded.split()]


def _names(filename: str) -> frozenset[str]:
    """The names of a `country | name` data file beside this module's package (`data/`), folded."""
    lines = (Path(__file__).parent.parent / "data" / filename).read_text(encoding="utf-8").splitlines()
    return frozenset(
        _fold_phrase(line.split("|", 1)[1]) for line in lines if "|" in line and not line.lstrip().startswith("#")
    )


PLACES, DEMONYMS = _read()
PLACES = PLACES | _names("foreign_cities.txt")
"""Folded names of foreign countries, capitals, US states, cities and regions; folded demonym forms."""

INSTITUTIONS = _names("foreign_institutions.txt")
"""Folded names of foreign institutions, documents and programs ("uscis", "registraduria", "green card"): a
question that names one is about that country's administration, wherever it is set."""
