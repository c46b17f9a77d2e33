"""What the bot itself says, in the member's language (en, it, fr).

Rule: a paired member reads their own locale; a chat not paired yet reads the language
Telegram reports for its user (`from.language_code`), English when it is none of ours.

Trap: every language has every key with the same placeholders (tests/test_telegram.py
checks); a missing one would raise in the middle of a reply.
"""

from __future__ import annotations

__all__ = ["TEXTS", "UNAVAILABLE", "lang_of", "say"]

TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "unavailable": "Pairing is unavailable right now. Please try again later.",
        "not_allowed": "Telegram is not available to your account. Ask an administrator.",
        "private_first": "Write to me in a private chat first to pair your account.",
        "gone": "This chat is no longer paired.",
        "locked": "Your data is locked: sign in to Skald on the web once, then write again.",
        "paired": "Paired. Write to me and your assistant answers.",
        "bad_code": "That code is not valid or has expired.",
        "code": "To pair this chat with your Skald account, open Skald, go to Telegram and "
        "enter this code: {code}\nIt is valid for 24 hours. Or type the code the Telegram "
        "page shows you here.",
        "help": "Paired. Write to me and your assistant answers. "
        "Commands: /new, /stop, /compact, /sethome, /unpair.",
        "unpaired": "This chat is no longer paired with your account.",
        "sethome": "Notifications will come to this chat.",
        "stopped": "Stopped.",
        "no_media": "Files are not taken in this group.",
        "too_large": "That file is too large for a bot to receive (20 MB).",
        "quota_full": "Your storage is full, so the file was not kept. Delete files you no "
        "longer need to make room.",
        "disk_full": "The household's disk is nearly full, so the file was not kept. Tell "
        "the administrator.",
        "failed": "The answer failed.",
        "waiting": "Waiting for your decision in the Inbox.",
        "no_answer": "(no answer)",
        "ask": "Approve {name}?",
        "approve": "Approve",
        "reject": "Reject",
        "details": "See details",
        "approved": "Approved.",
        "rejected": "Rejected.",
        "not_waiting": "This request is no longer waiting. Open the Inbox on the web.",
    },
    "it": {
        "unavailable": "L'abbinamento non è disponibile in questo momento. Riprova più tardi.",
        "not_allowed": "Telegram non è disponibile per il tuo account. Chiedi a un amministratore.",
        "private_first": "Scrivimi prima in una chat privata per abbinare il tuo account.",
        "gone": "Questa chat non è più abbinata.",
        "locked": "I tuoi dati sono bloccati: accedi una volta a Skald dal web, poi riscrivi.",
        "paired": "Abbinato. Scrivimi e il tuo assistente risponde.",
        "bad_code": "Quel codice non è valido o è scaduto.",
        "code": "Per abbinare questa chat al tuo account Skald, apri Skald, vai su Telegram e "
        "inserisci questo codice: {code}\nVale 24 ore. Oppure scrivi qui il codice che ti "
        "mostra la pagina Telegram.",
        "help": "Abbinato. Scrivimi e il tuo assistente risponde. "
        "Comandi: /new, /stop, /compact, /sethome, /unpair.",
        "unpaired": "Questa chat non è più abbinata al tuo account.",
        "sethome": "Le notifiche arriveranno in questa chat.",
        "stopped": "Interrotto.",
        "no_media": "In questo gruppo non si accettano file.",
        "too_large": "Il file è troppo grande perché un bot lo riceva (20 MB).",
        "quota_full": "Il tuo spazio è pieno, quindi il file non è stato tenuto. Elimina i "
        "file che non ti servono più per fare spazio.",
        "disk_full": "Il disco della famiglia è quasi pieno, quindi il file non è stato "
        "tenuto. Avvisa l’amministratore.",
        "failed": "La risposta non è riuscita.",
        "waiting": "In attesa della tua decisione nella Posta.",
        "no_answer": "(nessuna risposta)",
        "ask": "Approvi {name}?",
        "approve": "Approva",
        "reject": "Rifiuta",
        "details": "Dettagli",
        "approved": "Approvato.",
        "rejected": "Rifiutato.",
        "not_waiting": "Questa richiesta non è più in attesa. Apri la Posta sul web.",
    },
    "fr": {
        "unavailable": "L’association est indisponible pour le moment. Réessayez plus tard.",
        "not_allowed": "Telegram n’est pas disponible pour votre compte. "
        "Demandez à un administrateur.",
        "private_first": "Écrivez-moi d’abord en discussion privée pour associer votre compte.",
        "gone": "Cette discussion n’est plus associée.",
        "locked": "Vos données sont verrouillées : connectez-vous une fois à Skald sur le web, "
        "puis réécrivez.",
        "paired": "Associé. Écrivez-moi et votre assistant répond.",
        "bad_code": "Ce code n’est pas valide ou a expiré.",
        "code": "Pour associer cette discussion à votre compte Skald, ouvrez Skald, allez dans "
        "Telegram et saisissez ce code : {code}\nIl est valable 24 heures. Ou tapez ici le "
        "code que la page Telegram vous donne.",
        "help": "Associé. Écrivez-moi et votre assistant répond. "
        "Commandes : /new, /stop, /compact, /sethome, /unpair.",
        "unpaired": "Cette discussion n’est plus associée à votre compte.",
        "sethome": "Les notifications arriveront dans cette discussion.",
        "stopped": "Arrêté.",
        "no_media": "Ce groupe n’accepte pas les fichiers.",
        "too_large": "Ce fichier est trop grand pour qu’un bot le reçoive (20 Mo).",
        "quota_full": "Votre espace est plein : le fichier n’a pas été gardé. Supprimez les "
        "fichiers dont vous n’avez plus besoin pour faire de la place.",
        "disk_full": "Le disque du foyer est presque plein : le fichier n’a pas été gardé. "
        "Prévenez l’administrateur.",
        "failed": "La réponse a échoué.",
        "waiting": "En attente de votre décision dans la Boîte de réception.",
        "no_answer": "(pas de réponse)",
        "ask": "Approuver {name} ?",
        "approve": "Approuver",
        "reject": "Refuser",
        "details": "Détails",
        "approved": "Approuvé.",
        "rejected": "Refusé.",
        "not_waiting": "Cette demande n’est plus en attente. Ouvrez la Boîte de réception "
        "sur le web.",
    },
}


def lang_of(code: object) -> str:
    """One of our languages for a locale or Telegram `language_code` ("it-IT" → it)."""
    head = str(code or "").lower()[:2]
    return head if head in TEXTS else "en"


def say(lang: str, key: str, **values: object) -> str:
    return TEXTS[lang_of(lang)][key].format(**values)


UNAVAILABLE = say("en", "unavailable")
