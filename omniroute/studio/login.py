"""Log in with the admin token once; log out."""

from __future__ import annotations

from flask import redirect, render_template, request, url_for

from omniroute.studio.blueprint import bp, safe_next
from omniroute.web.auth import check_admin_token, log_in, log_out, session_is_admin


@bp.get("/")
def index():
    return redirect(url_for("studio.memory"))


@bp.route("/login", methods=["GET", "POST"])
def login():
    target = safe_next(request.values.get("next"))
    if request.method == "GET":
        if session_is_admin():
            return redirect(target)
        return render_template("studio/login.html", next=target, error=None)
    token = request.form.get("token", "").strip()
    if not token or not check_admin_token(token):
        error = "Enter the admin token." if not token else "That is not the admin token."
        return render_template("studio/login.html", next=target, error=error), 401
    log_in()
    return redirect(target, code=303)


@bp.post("/logout")
def logout():
    log_out()
    return redirect(url_for("studio.login"), code=303)
