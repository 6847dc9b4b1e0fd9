"""Every URL the web app answers, in one table; ``app.main`` builds the app around it.

A fixed path comes before a pattern that would match it too (``/convites/eventos`` first).
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Mount, Route

from app.config import Settings
from app.ops import page as ops
from app.web import (
    answers,
    api,
    api_keys,
    batch_stream,
    batches,
    cancelling,
    corrections,
    erasure,
    events,
    exports,
    health,
    invites,
    mailbox,
    open_sessions,
    optout,
    reminding,
    scheduling,
    signin,
    summary,
    webhooks,
)
from app.web.static import StaticAssets

#: What the sender may do to one invite (its row's buttons), at ``/convites/{id}/<action>`` and,
#: for an API key, at ``/api/v1/convites/{id}/<action>``.
INVITE_ACTIONS = (
    ("reenviar", invites.resend),
    ("corrigir", corrections.correct),
    ("cancelar", cancelling.cancel),
    ("reagendar", scheduling.reschedule),
    ("lembrar", reminding.remind),
)


def routes(settings: Settings, static: StaticAssets) -> list[BaseRoute]:
    """The routes of an app configured by ``settings``, serving ``static`` under ``/static``."""
    table: list[BaseRoute] = [
        # The sender's invites, and their live stream.
        Route("/", invites.index, methods=["GET"]),
        Route("/convites", invites.list_mine, methods=["GET"]),
        Route("/convites.csv", exports.my_invites, methods=["GET"]),
        Route("/convites", invites.create, methods=["POST"]),
        Route("/convites/eventos", events.stream, methods=["GET"]),
        Route("/convites/resumo", summary.show, methods=["GET"]),
        Route("/convites/{public_id}", invites.show, methods=["GET"]),
        *(
            Route(f"/convites/{{public_id}}/{action}", handler, methods=["POST"])
            for action, handler in INVITE_ACTIONS
        ),
        # Signing in and the account.
        Route("/entrar", signin.show_form, methods=["GET"]),
        Route("/entrar", signin.request_link, methods=["POST"]),
        Route("/entrar/pedido/{public_id}", signin.show_request, methods=["GET"]),
        Route("/entrar/{token}", signin.open_link, methods=["GET"]),
        Route("/entrar/{token}", signin.use_link, methods=["POST"]),
        Route("/conta", signin.show_account, methods=["GET"]),
        Route("/conta", signin.save_account, methods=["POST"]),
        Route("/conta/chaves", api_keys.show, methods=["GET"]),
        Route("/conta/chaves", api_keys.create, methods=["POST"]),
        Route("/conta/chaves/{public_id}/revogar", api_keys.confirm_revoke, methods=["GET"]),
        Route("/conta/chaves/{public_id}/revogar", api_keys.revoke, methods=["POST"]),
        Route("/conta/webhooks", webhooks.show, methods=["GET"]),
        Route("/conta/webhooks", webhooks.create, methods=["POST"]),
        Route("/conta/webhooks/{public_id}/excluir", webhooks.confirm_remove, methods=["GET"]),
        Route("/conta/webhooks/{public_id}/excluir", webhooks.remove, methods=["POST"]),
        Route("/conta/webhooks/entregas/{public_id}/reenviar", webhooks.resend, methods=["POST"]),
        Route("/conta/sessoes/encerrar-todas", open_sessions.end_all, methods=["POST"]),
        Route("/conta/sessoes/{public_id}/encerrar", open_sessions.end_one, methods=["POST"]),
        Route("/sair", signin.sign_out, methods=["POST"]),
        # The invitee's answer.
        Route("/c/{token}", answers.show, methods=["GET"]),
        Route("/c/{token}/aceitar", answers.accept, methods=["POST"]),
        Route("/c/{token}/recusar", answers.decline, methods=["POST"]),
        # The invitee's way out of every invitation (signed; the POST is RFC 8058 one-click).
        Route("/descadastro/{public_id}/{signature}", optout.show, methods=["GET"]),
        Route("/descadastro/{public_id}/{signature}", optout.confirm, methods=["POST"]),
        Route("/descadastro/{public_id}/{signature}/voltar", optout.take_back, methods=["POST"]),
        # The invitee's data erased, confirmed through a mailed link.
        Route("/c/{token}/apagar", erasure.ask, methods=["POST"]),
        Route(
            "/descadastro/{public_id}/{signature}/apagar",
            erasure.ask_from_optout,
            methods=["POST"],
        ),
        Route("/apagar/{token}", erasure.show, methods=["GET"]),
        Route("/apagar/{token}", erasure.confirm, methods=["POST"]),
        # Batches.
        Route("/lotes", batches.listing, methods=["GET"]),
        Route("/lotes/novo", batches.new, methods=["GET"]),
        Route("/lotes/novo", batches.reopen, methods=["POST"]),
        Route("/lotes/revisar", batches.check, methods=["POST"]),
        Route("/lotes", batches.send, methods=["POST"]),
        Route("/lotes/{public_id}.csv", exports.batch, methods=["GET"]),
        Route("/lotes/{public_id}", batches.show, methods=["GET"]),
        Route("/lotes/{public_id}/eventos", batch_stream.stream, methods=["GET"]),
        # The HTTP API: the same handlers, for an API key (app/web/api.py).
        Route("/api/v1/openapi.json", api.openapi, methods=["GET"]),
        Route("/api/v1/convites", api.list_invites, methods=["GET"]),
        Route("/api/v1/convites", api.api_endpoint(invites.create), methods=["POST"]),
        Route("/api/v1/convites/{public_id}", api.api_endpoint(invites.show), methods=["GET"]),
        *(
            Route(
                f"/api/v1/convites/{{public_id}}/{action}",
                api.api_endpoint(handler),
                methods=["POST"],
            )
            for action, handler in INVITE_ACTIONS
        ),
        Route("/api/v1/lotes/revisar", api.api_endpoint(batches.check), methods=["POST"]),
        Route("/api/v1/lotes", api.api_endpoint(batches.send), methods=["POST"]),
        Route("/api/v1/lotes/{public_id}", api.api_endpoint(batches.show), methods=["GET"]),
        Route("/api/v1/webhooks", api.api_endpoint(webhooks.show), methods=["GET"]),
        Route("/api/v1/webhooks", api.api_endpoint(webhooks.create), methods=["POST"]),
        Route(
            "/api/v1/webhooks/{public_id}", api.api_endpoint(webhooks.remove), methods=["DELETE"]
        ),
        # Health and metrics.
        Route("/saude", health.saude, methods=["GET"]),
        Route("/metrics", health.metrics_endpoint, methods=["GET"]),
        Mount("/static", static, name="static"),
    ]
    if settings.mailbox_dir is not None and settings.is_dev:
        table += [
            Route("/caixa", mailbox.inbox, methods=["GET"]),
            Route("/caixa/{name}", mailbox.message, methods=["GET"]),
            Route("/caixa/{name}/devolver", mailbox.simulate_bounce, methods=["POST"]),
        ]
    if settings.ops_token is not None:
        table += [
            Route("/operacao", ops.page, methods=["GET"]),
            Route("/operacao/entrar", ops.login, methods=["POST"]),
            Route("/operacao/sair", ops.logout, methods=["POST"]),
            Route("/operacao/tentar-de-novo", ops.retry, methods=["POST"]),
            Route("/operacao/eventos", ops.stream, methods=["GET"]),
            Route("/operacao/pausar", ops.pause, methods=["POST"]),
            Route("/operacao/retomar", ops.resume, methods=["POST"]),
            Route("/operacao/supressao/retirar", ops.lift_suppression, methods=["POST"]),
        ]
    return table
