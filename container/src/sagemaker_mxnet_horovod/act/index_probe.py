"""Whether pip's package indexes answer, asked once each, all at once, within one deadline: pip itself retries an
index it cannot reach for minutes (5 retries of a 15 s timeout, for every page it needs), and says little about
which. A server that answers at all (any HTTP status, or a TLS handshake pip may not accept) counts as reached:
what it says is pip's to report, quickly. No credentials are sent."""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable

PROBE_TIMEOUT_S = 15.0  # pip's own default network timeout


def without_credentials(url: str) -> str:
    """The URL as logs may show it: user and password (a token) left out."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")).geturl()


def probe_url(location: str, index: bool) -> str:
    """What to ask: an index's page for pip (small on any index, unlike the index's own page; 404 is an answer too),
    a find-links page itself."""
    url = without_credentials(location)
    return url.rstrip("/") + "/pip/" if index else url


def unreachable_reason(url: str, timeout_s: float) -> str | None:
    """None when something answered at url, else why not ("timed out after 15 s", "Name or service not known")."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            response.read(1)
    except urllib.error.HTTPError:
        return None  # an answer
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, ssl.SSLError):
            return None  # a server is there; pip checks its certificate with its own settings
        if isinstance(reason, (TimeoutError, socket.timeout)):
            return f"no answer within {timeout_s:g} s"
        if isinstance(reason, socket.gaierror):
            return f"its name does not resolve ({reason.strerror})"
        return str(getattr(reason, "strerror", None) or reason)
    except ssl.SSLError:
        return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as error:
        return error.strerror or str(error)
    return None


def unreachable(urls: Iterable[str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, str]:
    """Each url that did not answer within timeout_s, and why; all asked at once. A name lookup cannot be given a
    timeout: one still running at the deadline counts as no answer."""
    urls = list(dict.fromkeys(urls))
    reasons: dict[str, str | None] = {}
    done = threading.Condition()

    def ask(url: str) -> None:
        reason = unreachable_reason(url, timeout_s)
        with done:
            reasons[url] = reason
            done.notify_all()

    for url in urls:
        threading.Thread(target=ask, args=(url,), daemon=True, name=f"probe {url}").start()
    with done:
        done.wait_for(lambda: len(reasons) == len(urls), timeout=timeout_s + 1)
        answered = dict(reasons)
    return {url: answered.get(url) or f"no answer within {timeout_s:g} s" for url in urls
            if url not in answered or answered[url] is not None}
